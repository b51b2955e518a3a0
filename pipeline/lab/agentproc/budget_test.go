package agentproc_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/forklab/forklab/pipeline/lab/agentproc"
	"github.com/forklab/forklab/pipeline/lab/sweep"
)

// maxSeedSteps bounds what one seed of the counter world costs: a run
// takes at most 9 steps (its base budget with the default slack), so the
// run to the fork and its two branches at most 27.
const maxSeedSteps = 27

// A budget stops the sweep having spent at most one seed's cost beyond
// it, whatever the pool's size and though the agent takes batches of 64
// seeds (the QA report: steps=50 stopped at 1510). Resumed at the same
// budget, the sweep counts what the interrupted run spent and asks the
// agent for nothing more.
func TestBudgetOvershootsByAtMostOneSeed(t *testing.T) {
	spec := sweep.DefaultSpec()
	spec.Seeds = sweep.Range{Start: 0, End: 3000}
	spec.UnitSeeds = 500
	for _, tc := range []struct {
		parallel int
		limit    float64
	}{{1, 50}, {4, 50}, {4, 500}, {2, 2000}} {
		t.Run(fmt.Sprintf("parallel %d steps %g", tc.parallel, tc.limit), func(t *testing.T) {
			budget := map[string]float64{"steps": tc.limit}
			def := openAgent(t, agent("counter", ""), tc.parallel, 10*time.Second, 1)
			def.SetBudget(budget)
			out, _, err := sweepWith(t, spec, def, "", false, sweep.Options{Workers: 2, KeptCost: def.AddKept})
			if !errors.Is(err, agentproc.ErrStopped) {
				t.Fatalf("got %v, want ErrStopped", err)
			}
			spent, _ := def.Spent()
			if s := float64(spent.Steps); s < tc.limit || s >= tc.limit+maxSeedSteps {
				t.Fatalf("stopped at %d steps; want at least %g and less than one seed (%d steps) more", spent.Steps, tc.limit, maxSeedSteps)
			}
			if want := fmt.Sprintf("steps reached %d of the budget steps=%g", spent.Steps, tc.limit); def.Reached() != want {
				t.Errorf("Reached() = %q, want %q", def.Reached(), want)
			}
			count := filepath.Join(t.TempDir(), "count")
			again := openAgent(t, agent("counter", "count="+count), tc.parallel, 10*time.Second, 1)
			again.SetBudget(budget)
			_, _, err = sweepWith(t, spec, again, out, true, sweep.Options{Workers: 2, KeptCost: again.AddKept})
			if !errors.Is(err, agentproc.ErrStopped) {
				t.Fatalf("resumed at the same budget: got %v, want ErrStopped", err)
			}
			if n := len(requests(t, count)); n != 0 {
				t.Errorf("resumed at the same budget, the sweep asked the agent %d times", n)
			}
			if s, _ := again.Spent(); s.Steps != 0 || again.Counted().Steps != spent.Steps {
				t.Errorf("resumed: spent %+v, counted %+v; want nothing spent and the %d steps in the journal counted", s, again.Counted(), spent.Steps)
			}
			// Resumed with twice the budget, it goes on to the new limit.
			more := openAgent(t, agent("counter", ""), tc.parallel, 10*time.Second, 1)
			more.SetBudget(map[string]float64{"steps": 2 * tc.limit})
			_, _, err = sweepWith(t, spec, more, out, true, sweep.Options{Workers: 2, KeptCost: more.AddKept})
			if !errors.Is(err, agentproc.ErrStopped) {
				t.Fatalf("resumed at twice the budget: got %v, want ErrStopped", err)
			}
			if c := float64(more.Counted().Steps); c < 2*tc.limit || c >= 2*tc.limit+maxSeedSteps {
				t.Fatalf("resumed at twice the budget, stopped at %g steps", c)
			}
		})
	}
}
