package agent

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/analysis/policy"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/sessions/sessiontest"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/stream/client"
)

// sweepInto runs the resolved spec into a new results directory, with the
// runners of opt (nil: the world's own, in memory), and returns its
// Parquet files by path.
func sweepInto(t *testing.T, r sweep.Resolved, opt sweep.Options) map[string][]byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	st, err := sweep.Stage(out, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sweep.Run(context.Background(), r, st, opt); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Ext(p) == ".parquet" {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(out, p)
			files[rel] = b
		}
		return err
	})
	return files
}

// The proof that the agent's state can be copied: a sweep whose runs and
// branches are sessions on the log, forked from their offsets, writes the
// same tables, byte for byte, as the in-memory sweep — for the seed's
// experiment, for a noisy counter sweep with every arm, several replicas,
// two fork steps and a grid of two configurations, and for a world
// registered only in this test (two cost fields, a policy arm, no
// placebo).
func TestSweepFromLogEqualsInMemory(t *testing.T) {
	sessiontest.Register(t)
	svc := startLog(t, "127.0.0.1:0", t.TempDir())
	c := client.New(svc.URL)

	seedSpec := sweep.DefaultSpec()

	noisySpec := sweep.DefaultSpec()
	noisySpec.Seeds = sweep.Range{Start: 1000, End: 1030}
	noisySpec.ForkAt = []int{2, 3}
	noisySpec.Arms = []fork.Arm{fork.Off, fork.On, fork.Placebo, fork.AA}
	noisySpec.Replicas = 3
	noisySpec.Params = world.Params{"p_stall": 0.15, "p_obs_noise": 0.05}
	noisySpec.Model.Temperature = 0.2
	noisySpec.Grid = map[string][]any{"p_refresh_fail": {0.0, 0.3}}

	tinySpec := sweep.DefaultSpec()
	tinySpec.World = sessiontest.Name
	tinySpec.Seeds = sweep.Range{Start: 0, End: 60}
	tinySpec.ForkAt = []int{1, 3}
	tinySpec.Arms = []fork.Arm{fork.Off, fork.On, fork.AA, fork.Policy}
	tinySpec.Replicas = 2
	tinySpec.Params = world.Params{"goal": 5}
	tinySpec.Model = fork.Model{Temperature: 0.1, NoTool: 0.5}
	rule, err := policy.Decode([]byte(`{"policy_version":2,"world":"tiny","world_version":"1","all":[{"feature":"stalled","op":"=","value":true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	tinySpec.Policy = &rule

	for _, tc := range []struct {
		name string
		spec sweep.Spec
	}{{"seed", seedSpec}, {"noisy", noisySpec}, {"tiny", tinySpec}} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.spec.Resolve()
			if err != nil {
				t.Fatal(err)
			}
			fromLog := sweepInto(t, r, sweep.Options{Runners: Runners(c, r, PlayOptions{Prefix: "test-" + tc.name, Parallel: 24})})
			inMemory := sweepInto(t, r, sweep.Options{})
			if len(fromLog) == 0 || len(fromLog) != len(inMemory) {
				t.Fatalf("%d files from the log, %d in memory", len(fromLog), len(inMemory))
			}
			for f, b := range inMemory {
				if !bytes.Equal(b, fromLog[f]) {
					t.Errorf("%s differs between the sweep from the log and the in-memory sweep", f)
				}
			}
			// The runs and branches are on the log: one stream per seed and
			// configuration, and one per branch.
			names, err := c.List(context.Background(), "test-"+tc.name+"/")
			if err != nil {
				t.Fatal(err)
			}
			plan := r.Plan()
			want := int(tc.spec.Seeds.Len()) * len(r.Configs) * (1 + len(plan.ForkSteps)*plan.Branches())
			if len(names) != want {
				t.Fatalf("%d streams under test-%s/, want %d", len(names), tc.name, want)
			}
		})
	}
	// A second play with the same prefix refuses to reuse the streams.
	r, _ := seedSpec.Resolve()
	out := filepath.Join(t.TempDir(), "again")
	st, _ := sweep.Stage(out, false, false)
	_, err = sweep.Run(context.Background(), r, st, sweep.Options{Runners: Runners(c, r, PlayOptions{Prefix: "test-seed"})})
	if err == nil || !strings.Contains(err.Error(), "exists already: use a new --log-prefix") {
		t.Fatalf("reusing a prefix: %v", err)
	}
	st.Release()
}
