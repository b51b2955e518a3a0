// Package resultstest runs small sweeps for the tests of the packages that
// read results directories (report, search, htmlreport, export).
package resultstest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/forklab/forklab/pipeline/analysis/results"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/world"

	// Tests sweep the built-in worlds.
	_ "github.com/forklab/forklab/pipeline/worlds/counter"
	_ "github.com/forklab/forklab/pipeline/worlds/toolloop"
)

// Dir runs spec into a new temporary results directory and returns it.
func Dir(t testing.TB, spec sweep.Spec) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	Run(t, spec, out)
	return out
}

// Run runs spec into the results directory out (replacing what is there)
// and returns the manifest.
func Run(t testing.TB, spec sweep.Spec, out string) sweep.Manifest {
	t.Helper()
	r, err := spec.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	st, err := sweep.Stage(out, true, false)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sweep.Run(context.Background(), r, st, sweep.Options{Version: "test"})
	if err != nil {
		st.Release()
		t.Fatal(err)
	}
	return res.Manifest
}

// Open runs spec as Dir does and opens the results, closing them when the
// test ends.
func Open(t testing.TB, spec sweep.Spec) *results.DB {
	t.Helper()
	db, err := results.Open(context.Background(), Dir(t, spec))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// NoisySpec is a small noisy sweep over seeds 0:400: two fork steps, every
// arm but policy, three replicas, an imperfect world and a noisy model, so
// that every report query has rows to return.
func NoisySpec() sweep.Spec {
	s := sweep.DefaultSpec()
	s.Seeds = sweep.Range{Start: 0, End: 400}
	s.ForkAt = []int{2, 3}
	s.Arms = []fork.Arm{fork.Off, fork.On, fork.Placebo, fork.AA}
	s.Replicas = 3
	s.Params = world.Params{"p_stall": 0.15, "p_obs_noise": 0.05, "p_refresh_fail": 0.2}
	s.Model.Temperature = 0.1
	return s
}
