package report

import (
	"context"
	"fmt"

	"github.com/forklab/forklab/pipeline/analysis/pairview"
	"github.com/forklab/forklab/pipeline/analysis/results"
	"github.com/forklab/forklab/pipeline/lab/fork"
)

// Examples are a few pairs worth opening in every slice: the first two
// rescued and the first two harmed pairs (by seed) of each bucket of each
// feature (queries/slice_examples.sql), and the side-by-side view of every
// pair they name (pairview, replica 0), which the HTML report embeds and
// links from its slice tables.
type Examples struct {
	// Slices is slice_examples.sql's table: config_id, fork_step, arm,
	// feature, value, label, seeds.
	Slices *results.Table
	// Views holds the view of every pair Slices names, in the order they
	// are first named; ID keys them.
	Views []*pairview.View
}

// ID is the HTML id of the view of a pair (pairview.ID, replica 0).
func ID(config, forkStep int, arm fork.Arm, seed uint64) string {
	return pairview.ID(config, forkStep, arm, seed, 0)
}

// Seeds reads the seeds column of a slice_examples row (a DuckDB list).
func Seeds(r results.Row) []uint64 {
	xs, _ := r["seeds"].([]any)
	out := make([]uint64, 0, len(xs))
	for _, x := range xs {
		out = append(out, uint64(results.Int(x)))
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
		for _, seed := range Seeds(r) {
			q := pairview.Query{Config: int(r.Int("config_id")), Seed: seed, ForkStep: int(r.Int("fork_step")), Arm: fork.Arm(r.Str("arm"))}
			id := ID(q.Config, q.ForkStep, q.Arm, seed)
			if seen[id] {
				continue
			}
			seen[id] = true
			if err := ctx.Err(); err != nil {
				return err
			}
			v, err := sw.Pair(q)
			if err != nil {
				return fmt.Errorf("the view of seed %d (%s, fork step %d): %w", seed, q.Arm, q.ForkStep, err)
			}
			ex.Views = append(ex.Views, v)
		}
	}
	s.Examples = ex
	return nil
}
