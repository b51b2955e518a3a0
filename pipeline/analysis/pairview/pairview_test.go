package pairview_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/analysis/pairview"
	"github.com/forklab/forklab/pipeline/analysis/policy"
	"github.com/forklab/forklab/pipeline/analysis/results/resultstest"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/pipeline/worlds/counter"
	"github.com/forklab/forklab/pipeline/worlds/toolloop"
)

var update = flag.Bool("update", false, "rewrite the golden views in testdata/show")

func open(t testing.TB, dir string) *pairview.Sweep {
	t.Helper()
	s, err := pairview.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A branch played again from its checkpoint is the branch the sweep
// played: its steps are, byte for byte, the transcript a sweep with
// --transcripts keeps, for every arm (the policy arm's rule firing or not)
// and replica, at every fork step, in several units (the rows are found by
// arithmetic on the seed), with a noisy model and an imperfect counter, and
// for toolloop.
func TestReplayIsTheKeptTranscript(t *testing.T) {
	imperfect := counter.Default()
	imperfect.PStall, imperfect.PObsNoise, imperfect.PRefreshFail = 0.2, 0.1, 0.3
	rule := policy.Rule{Version: policy.Version, World: "counter", WorldVersion: counter.Version,
		All: []policy.Condition{{Feature: "same_obs", Op: "=", Value: true}}}
	cs := sweep.DefaultSpec()
	cs.Seeds, cs.ForkAt, cs.Replicas, cs.UnitSeeds = sweep.Range{Start: 100, End: 400}, []int{2, 3}, 3, 64
	cs.Arms = []fork.Arm{fork.Off, fork.On, fork.Placebo, fork.AA, fork.Policy}
	cs.Params, cs.Model, cs.Policy = imperfect.WorldParams(), fork.Model{Temperature: 0.2, NoTool: 0.5}, &rule
	ts := sweep.DefaultSpec()
	ts.World, ts.Seeds, ts.ForkAt, ts.Replicas, ts.UnitSeeds = toolloop.Name, sweep.Range{Start: 0, End: 150}, []int{2}, 3, 64
	ts.Arms, ts.Model = []fork.Arm{fork.Off, fork.On, fork.AA}, fork.Model{Temperature: 0.3, NoTool: 0.5}
	for _, spec := range []sweep.Spec{cs, ts} {
		t.Run(spec.World, func(t *testing.T) {
			kept := spec
			kept.Transcripts = true
			with, without := open(t, resultstest.Dir(t, kept)), open(t, resultstest.Dir(t, spec))
			views, parted := 0, 0
			for seed := spec.Seeds.Start; seed < spec.Seeds.End; seed += 7 {
				for _, step := range spec.ForkAt {
					for _, arm := range with.Treatments() {
						for rep := range spec.Replicas {
							q := pairview.Query{Config: 0, Seed: seed, ForkStep: step, Arm: arm, Replica: rep}
							a, err := with.Pair(q)
							if err != nil {
								t.Fatal(err)
							}
							b, err := without.Pair(q)
							if err != nil {
								t.Fatal(err)
							}
							if a.Replayed || !b.Replayed {
								t.Fatalf("%+v: replayed %t and %t, want false and true", q, a.Replayed, b.Replayed)
							}
							ja, _ := json.Marshal([]any{a.Control.Steps, a.Treated.Steps, a.Part, a.Pair})
							jb, _ := json.Marshal([]any{b.Control.Steps, b.Treated.Steps, b.Part, b.Pair})
							if !bytes.Equal(ja, jb) {
								t.Fatalf("%+v:\nkept     %s\nreplayed %s", q, ja, jb)
							}
							checkCosts(t, q, a)
							views++
							if a.Part >= 0 {
								parted++
							}
						}
					}
				}
			}
			if views < 100 || parted == 0 || parted == views {
				t.Fatalf("%d views, %d of them parted", views, parted)
			}
		})
	}
}

// checkCosts holds a view to its rows: each branch's steps add up to its
// cost, begin with the intervention exactly when it intervened, and end
// in a run that is over.
func checkCosts(t *testing.T, q pairview.Query, v *pairview.View) {
	t.Helper()
	for _, b := range []pairview.Branch{v.Control, v.Treated} {
		var sum world.Cost
		for i, st := range b.Steps {
			var c world.Cost
			if err := json.Unmarshal(st.Cost, &c); err != nil {
				t.Fatalf("%+v %s step %d cost %s: %v", q, b.Arm, i, st.Cost, err)
			}
			sum = sum.Add(c)
			if st.Intervention != (i == 0 && b.Intervened) {
				t.Fatalf("%+v %s step %d: intervention %t", q, b.Arm, i, st.Intervention)
			}
		}
		if sum != b.Cost {
			t.Fatalf("%+v %s: steps cost %+v, the branch %+v", q, b.Arm, sum, b.Cost)
		}
	}
}

// The views of the seed's reference core (counter, seeds 0:300, fork step
// 3, arms off and on), as forklab show prints them: seed 5, rescued (its
// sensor stuck at 0; refresh re-reads 3), seed 1, harmed (the refresh's
// step is the one the declaration needed), and seed 7, a sure thing;
// docs/show.md shows seed 5's.
func TestGoldenViews(t *testing.T) {
	spec := sweep.DefaultSpec()
	s := open(t, resultstest.Dir(t, spec))
	for _, seed := range []uint64{5, 1, 7} {
		v, err := s.Pair(pairview.Query{Config: -1, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := pairview.Write(&got, v, 1); err != nil {
			t.Fatal(err)
		}
		golden := filepath.Join("..", "..", "..", "testdata", "show", fmt.Sprintf("counter-seed%d.txt", seed))
		if *update {
			if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != string(want) {
			t.Errorf("seed %d:\n%s\nwant (%s):\n%s", seed, got.String(), golden, want)
		}
	}
	// docs/show.md shows seed 5's view as it is.
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "show.md"))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "show", "counter-seed5.txt"))
	if !strings.Contains(string(doc), "```text\n"+string(want)+"```\n") {
		t.Errorf("docs/show.md does not show seed 5's view as forklab show prints it:\n%s", want)
	}
}

// A query outside the sweep is refused naming what the sweep holds; the
// defaults (the only configuration, fork step, arm) are filled in only
// where there is one.
func TestQueriesOutsideTheSweep(t *testing.T) {
	spec := sweep.DefaultSpec()
	spec.Seeds, spec.ForkAt, spec.Arms, spec.Replicas = sweep.Range{Start: 10, End: 30}, []int{2, 3}, []fork.Arm{fork.Off, fork.On, fork.Placebo}, 3
	s := open(t, resultstest.Dir(t, spec))
	good := pairview.Query{Config: -1, Seed: 10, ForkStep: 2, Arm: fork.On, Replica: 2}
	if _, err := s.Pair(good); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		edit func(*pairview.Query)
		want string
	}{
		{func(q *pairview.Query) { q.Seed = 30 }, "seed 30 is not in the sweep: its seeds are 10:30 (START:END, END exclusive)"},
		{func(q *pairview.Query) { q.Seed = 9 }, "seed 9 is not in the sweep: its seeds are 10:30"},
		{func(q *pairview.Query) { q.RunID = "011" }, `run id "011" is not in the sweep: its runs are the seeds 10:30, whose run ids are the seeds in decimal (5, not 05)`},
		{func(q *pairview.Query) { q.RunID = "run-7" }, `run id "run-7" is not in the sweep`},
		{func(q *pairview.Query) { q.ForkStep = 4 }, "fork step 4 is not in the sweep: it forks at steps 2, 3"},
		{func(q *pairview.Query) { q.ForkStep = 0 }, "the sweep forks at steps 2, 3: give one (--fork-step)"},
		{func(q *pairview.Query) { q.Arm = fork.AA }, "arm aa is not in the sweep: its treatment arms are on, placebo"},
		{func(q *pairview.Query) { q.Arm = fork.Off }, "arm off is the control, shown beside every treatment arm: give a treatment arm of the sweep (on, placebo)"},
		{func(q *pairview.Query) { q.Arm = "" }, "the sweep has treatment arms on, placebo: give one (--arm)"},
		{func(q *pairview.Query) { q.Replica = 3 }, "replica 3 is not in the sweep: it has 3 replicas per arm, 0 to 2"},
		{func(q *pairview.Query) { q.Config = 1 }, "configuration 1 is not in the sweep: its configurations are 0 to 0"},
	} {
		q := good
		tc.edit(&q)
		_, err := s.Pair(q)
		if !errors.Is(err, pairview.ErrNotInSweep) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", q, err, tc.want)
		}
	}
	q := good
	q.RunID = "29"
	if v, err := s.Pair(q); err != nil || v.Seed != 29 {
		t.Errorf("run id 29: %v", err)
	}
}
