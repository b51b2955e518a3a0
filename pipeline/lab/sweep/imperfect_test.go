package sweep_test

import (
	"strconv"
	"testing"

	"github.com/forklab/forklab/internal/duck/ducktest"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/pipeline/worlds/counter/countertest"
)

// imperfectSpec is the sweep of a golden configuration.
func imperfectSpec(c countertest.Config) sweep.Spec {
	spec := sweep.DefaultSpec()
	spec.Seeds = sweep.Range{Start: c.Seeds[0], End: c.Seeds[1]}
	spec.ForkAt = c.ForkAt
	spec.Arms = c.Arms
	spec.Replicas = c.Replicas
	spec.Params = world.Params(c.Params)
	spec.Model = c.Model
	spec.Policy = c.Rule()
	return spec
}

// The sweep of each noisy and imperfect golden configuration, read back
// from its Parquet files, gives the independent Python reference's tables
// and per-seed rows (testdata/seed/imperfect_golden.json): the task from
// tasks, the features, win counts and quadrant of every pair from pairs,
// and whether the policy rule fired from the policy arm's branches.
func TestSweepMatchesPythonReference(t *testing.T) {
	for _, c := range countertest.Load(t).Configs {
		t.Run(c.Name, func(t *testing.T) {
			out := runSweep(t, imperfectSpec(c), sweep.Options{})
			rows := ducktest.Query(t, out, `
				SELECT p.seed, p.fork_step, p.arm, p.status, p.control_wins, p.treatment_wins, p.quadrant,
				       p.same_obs, p.repeat_run, t.budget, coalesce(t.freeze_at, 0), coalesce(b.intervened, false)
				FROM {pairs} AS p
				JOIN {tasks} AS t ON t.config_id = p.config_id AND t.seed = p.seed
				LEFT JOIN {branches} AS b ON b.config_id = p.config_id AND b.fork_step = p.fork_step AND b.seed = p.seed
				     AND b.arm = 'policy' AND b.replica = 0
				ORDER BY p.seed, p.fork_step, p.arm`)
			var forks []countertest.Fork
			for _, r := range rows {
				seed, _ := strconv.ParseUint(r[0], 10, 64)
				step, _ := strconv.Atoi(r[1])
				if r[3] != "ok" {
					t.Fatalf("pair %v: status %s", r[:3], r[3])
				}
				n := len(forks)
				if n == 0 || forks[n-1].Seed != seed || forks[n-1].ForkStep != step {
					budget, _ := strconv.Atoi(r[9])
					freeze, _ := strconv.Atoi(r[10])
					repeat, _ := strconv.Atoi(r[8])
					offWins, _ := strconv.Atoi(r[4])
					forks = append(forks, countertest.Fork{Seed: seed, ForkStep: step, Budget: budget, FreezeAt: freeze,
						SameObs: r[7] == "true", RepeatRun: repeat, Wins: map[fork.Arm]int{fork.Off: offWins},
						Quadrants: map[fork.Arm]fork.Quadrant{}})
					n++
				}
				f := &forks[n-1]
				arm := fork.Arm(r[2])
				if r[4] != strconv.Itoa(f.Wins[fork.Off]) {
					t.Fatalf("pair %v: control_wins %s, another arm's pair has %d", r[:3], r[4], f.Wins[fork.Off])
				}
				f.Wins[arm], _ = strconv.Atoi(r[5])
				f.Quadrants[arm] = fork.Quadrant(r[6])
				if arm == fork.Policy {
					f.Fires = r[11] == "true"
				}
			}
			c.Check(t, "sweep", forks)
		})
	}
}
