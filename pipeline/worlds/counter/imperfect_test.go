package counter_test

import (
	"context"
	"testing"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/pipeline/worlds/counter"
	"github.com/forklab/forklab/pipeline/worlds/counter/countertest"
)

// runnerForks plays configuration c with def's runner, as a sweep does
// (seeds in a block, fork steps one after the other on the same run), and
// votes each side of a pair by fork.Majority.
func runnerForks(t *testing.T, def lab.Definition, c countertest.Config) []countertest.Fork {
	t.Helper()
	inst, err := def.Open(c.WorldParams(t), c.Model)
	if err != nil {
		t.Fatal(err)
	}
	plan := lab.Plan{ForkSteps: c.ForkAt, Arms: c.Arms, Replicas: c.Replicas, Fires: c.Fires(t)}
	r, err := inst.Runner(plan)
	if err != nil {
		t.Fatal(err)
	}
	K := c.Replicas
	var forks []countertest.Fork
	err = r.Run(context.Background(), c.Seeds[0], c.Seeds[1], func(res *lab.SeedResult) error {
		// Task: budget, slack, freeze_at (null: never sticks).
		budget, freeze := int(res.Task[0].I), 0
		if !res.Task[2].Null {
			freeze = int(res.Task[2].I)
		}
		for _, fr := range res.Forks {
			if fr.Err != "" {
				t.Fatalf("%s seed %d fork %d: %s", c.Name, res.Seed, fr.ForkStep, fr.Err)
			}
			// Features: same_obs, repeat_run, ...
			f := countertest.Fork{Seed: res.Seed, ForkStep: fr.ForkStep, Budget: budget, FreezeAt: freeze,
				SameObs: fr.Features[0].I != 0, RepeatRun: int(fr.Features[1].I), Fires: fr.Fires,
				Wins: map[fork.Arm]int{}, Quadrants: map[fork.Arm]fork.Quadrant{}}
			for ai, arm := range plan.Arms {
				for rep := range K {
					if fr.Branches[ai*K+rep].Success {
						f.Wins[arm]++
					}
				}
			}
			control := fork.Majority(f.Wins[fork.Off], K)
			for _, arm := range plan.Arms[1:] {
				_, f.Quadrants[arm] = fork.Classify(control, fork.Majority(f.Wins[arm], K))
			}
			forks = append(forks, f)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return forks
}

// The counter's own runner (what a sweep plays) and the generic in-process
// runner both give the independent Python reference's noisy and imperfect
// tables and per-seed rows (testdata/seed/imperfect_golden.json).
func TestRunnersMatchPythonReference(t *testing.T) {
	generic := lab.Builtin[counter.State]{Decl: counter.Declaration(), New: func(p world.Params) (world.World[counter.State], error) {
		return counter.New(counter.ParamsOf(p))
	}}
	for _, c := range countertest.Load(t).Configs {
		t.Run(c.Name, func(t *testing.T) {
			c.Check(t, "counter runner", runnerForks(t, counter.Definition, c))
			c.Check(t, "generic runner", runnerForks(t, generic, c))
		})
	}
}
