package sweep_test

import (
	"fmt"
	"testing"

	"github.com/forklab/forklab/internal/duck/ducktest"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/world"
	_ "github.com/forklab/forklab/pipeline/worlds/toolloop"
)

// A scored world's clean sweep streams its units: the score columns are in
// the layout of files without errors, so no unit is written again buffered
// (they were not, and every unit was: 1.8 times the sweep's CPU); its files
// are the buffered sweep's, byte for byte; each pair's scores are its
// branches' means, and score_diff their difference rounded to 12 decimals (within 5e-13 of it).
func TestScoredSweepStreams(t *testing.T) {
	spec := sweep.DefaultSpec()
	spec.World, spec.Params = "toolloop", world.Params{}
	spec.ForkAt = []int{2}
	spec.Arms = []fork.Arm{fork.Off, fork.On}
	spec.Replicas = 3
	spec.Model = fork.Model{Temperature: 0.05, NoTool: 1}
	spec.Seeds = sweep.Range{Start: 0, End: 2*spec.ShardSeeds() + 5}
	before := sweep.LayoutRedos()
	out := runSweep(t, spec, sweep.Options{Workers: 2})
	if n := sweep.LayoutRedos() - before; n != 0 {
		t.Errorf("%d units of a clean scored sweep were written again, buffered", n)
	}
	sameFiles(t, "buffered against streamed", tableFiles(t, out), tableFiles(t, runSweep(t, spec, sweep.Options{Workers: 2, Buffered: true})))
	rows := ducktest.Query(t, out, `
		WITH sides AS (
			SELECT config_id, fork_step, seed, arm, avg(score) AS mean, count(score) AS n
			FROM {branches} GROUP BY ALL
		)
		SELECT count(*) AS pairs,
		       count(*) FILTER (WHERE abs(p.score_control - c.mean) > 1e-15 OR abs(p.score_treated - t.mean) > 1e-15
		                          OR abs(p.score_diff - (p.score_treated - p.score_control)) > 5e-13 OR c.n <> 3 OR t.n <> 3) AS bad,
		       count(DISTINCT p.score_diff) AS diffs
		FROM {pairs} AS p
		JOIN sides AS c ON c.config_id = p.config_id AND c.fork_step = p.fork_step AND c.seed = p.seed AND c.arm = 'off'
		JOIN sides AS t ON t.config_id = p.config_id AND t.fork_step = p.fork_step AND t.seed = p.seed AND t.arm = p.arm`)
	if r := rows[0]; r[0] != fmt.Sprint(spec.Seeds.Len()) || r[1] != "0" || len(r[2]) < 2 {
		t.Errorf("pairs, pairs whose scores disagree with their branches, distinct differences: %v", r)
	}
}
