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
)

// Dir runs spec into a new temporary results directory and returns it.
func Dir(t testing.TB, spec sweep.Spec) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	if err := sweep.Prepare(out, false); err != nil {
		t.Fatal(err)
	}
	if _, err := sweep.Run(context.Background(), spec, sweep.Options{Out: out, Version: "test"}); err != nil {
		t.Fatal(err)
	}
	return out
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
	s.Params.PStall, s.Params.PObsNoise, s.Params.PRefreshFail = 0.15, 0.05, 0.2
	s.Model.Temperature = 0.1
	return s
}
