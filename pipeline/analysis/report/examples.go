package report

import (
	"context"
	"fmt"

	"github.com/forklab/forklab/pipeline/analysis/pairview"
	"github.com/forklab/forklab/pipeline/analysis/results"
	"github.com/forklab/forklab/pipeline/lab/fork"
)

// Examples are a few pairs worth opening in every slice: the first two
// rescued and the first two harmed pairs (by seed, then run id) of each
// bucket of each feature (queries/slice_examples.sql), and the
// side-by-side view of every pair they name (pairview, replica 0), which
// the HTML report embeds and links from its slice tables.
type Examples struct {
	// Slices is slice_examples.sql's table: config_id, fork_step, arm,
	// feature, value, label, seeds, run_ids.
	Slices *results.Table
	// Views holds the view of every pair Slices names, in the order they
	// are first named; ID keys them.
	Views []*pairview.View
}

// ID is the HTML id of the view of a pair (pairview.ID, replica 0).
func ID(config, forkStep int, arm fork.Arm, runID string) string {
	return pairview.ID(config, forkStep, arm, runID, 0)
}

// RunIDs reads the run_ids column of a slice_examples row (a DuckDB
// list): a seed population's are its seeds in decimal.
func RunIDs(r results.Row) []string {
	xs, _ := r["run_ids"].([]any)
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

// CollectExamples runs slice_examples.sql on db and reads the view of every
// pair it names from db's directory (pairview), into s.Examples. The text
// report does not need them; the HTML report shows them when they are
// there.
func CollectExamples(ctx context.Context, db *results.DB, s *Sections) error {
	t, err := db.Run(ctx, "slice_examples")
	if err != nil {
		return err
	}
	sw, err := pairview.Open(db.Dir)
	if err != nil {
		return err
	}
	defer sw.Close()
	ex := &Examples{Slices: t}
	seen := map[string]bool{}
	for _, r := range t.Records() {
		for _, run := range RunIDs(r) {
			q := pairview.Query{Config: int(r.Int("config_id")), RunID: run, ForkStep: int(r.Int("fork_step")), Arm: fork.Arm(r.Str("arm"))}
			id := ID(q.Config, q.ForkStep, q.Arm, run)
			if seen[id] {
				continue
			}
			seen[id] = true
			if err := ctx.Err(); err != nil {
				return err
			}
			v, err := sw.Pair(q)
			if err != nil {
				return fmt.Errorf("the view of run %s (%s, fork step %d): %w", run, q.Arm, q.ForkStep, err)
			}
			ex.Views = append(ex.Views, v)
		}
	}
	s.Examples = ex
	return nil
}
