package fork_test

import (
	"fmt"
	"testing"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/worlds/counter"
	"github.com/forklab/forklab/pipeline/worlds/counter/countertest"
)

// labForks plays configuration c through fork.Lab, the reference lab every
// runner is held to: each seed to each fork step with the prefix noise,
// then every arm and replica from the checkpoint, voted by fork.Majority
// and labelled by fork.Classify.
func labForks(t *testing.T, c countertest.Config) []countertest.Fork {
	w := c.World(t)
	l := labOf(w.P, c.Model)
	fires := c.Fires(t)
	var forks []countertest.Fork
	var final counter.State
	for seed := c.Seeds[0]; seed < c.Seeds[1]; seed++ {
		for _, step := range c.ForkAt {
			s := l.World.Start(seed)
			l.Advance(&s, fork.PrefixKey(seed), step, nil)
			f := countertest.Fork{Seed: seed, ForkStep: step, Budget: int(s.Budget), FreezeAt: int(s.FreezeAt),
				SameObs: s.SameObs, RepeatRun: int(s.RepeatRun),
				Wins: map[fork.Arm]int{}, Quadrants: map[fork.Arm]fork.Quadrant{}}
			if fires != nil {
				f.Fires = fires(l.World.Features(&s, nil))
			}
			for _, arm := range c.Arms {
				for rep := range c.Replicas {
					ok, iv := l.Branch(&final, &s, seed, step, arm, rep, f.Fires)
					if want := arm == fork.On || arm == fork.Placebo || arm == fork.Policy && f.Fires; iv != want {
						t.Fatalf("%s seed %d fork %d arm %s: intervened %t", c.Name, seed, step, arm, iv)
					}
					if ok {
						f.Wins[arm]++
					}
				}
			}
			control := fork.Majority(f.Wins[fork.Off], c.Replicas)
			for _, arm := range c.Arms[1:] {
				_, f.Quadrants[arm] = fork.Classify(control, fork.Majority(f.Wins[arm], c.Replicas))
			}
			forks = append(forks, f)
		}
	}
	return forks
}

// The noisy and imperfect configurations of imperfect_golden.json, played
// through fork.Lab, give the independent Python reference's per-seed rows
// and tables exactly: imperfect-world parameters (stalls, sensor noise,
// failing refreshes, other slack and fault lists, target and budget), the
// noisy model's departures and no-tool turns, every arm's noise stream and
// intervention, odd and even replica counts voted by strict majority,
// seeds up to 2^63-2.
func TestImperfectWorldsMatchPythonReference(t *testing.T) {
	for _, c := range countertest.Load(t).Configs {
		t.Run(c.Name, func(t *testing.T) {
			c.Check(t, "fork.Lab", labForks(t, c))
		})
	}
}

// The golden file is what the Python reference prints: the reference is
// run here (one python3 process) on every configuration's per-seed block,
// and on the whole seed range of the smallest configuration, so neither can
// drift from the other; and with the seed's parameters it still prints the
// seed's table.
func TestImperfectGoldenIsThePythonReferences(t *testing.T) {
	g := countertest.Load(t)
	size := func(c countertest.Config) uint64 {
		return uint64(len(c.Arms)*c.Replicas*len(c.ForkAt)) * (c.Seeds[1] - c.Seeds[0])
	}
	smallest := 0
	var jobs []countertest.Job
	for i, c := range g.Configs {
		if size(c) < size(g.Configs[smallest]) {
			smallest = i
		}
		jobs = append(jobs, countertest.Job{Config: c, Start: c.Seeds[0], Seeds: c.PerSeedSeeds, PerSeed: c.PerSeedSeeds})
	}
	c := g.Configs[smallest]
	jobs = append(jobs, countertest.Job{Config: c, Start: c.Seeds[0], Seeds: c.Seeds[1] - c.Seeds[0]})
	// With the seed's parameters and a greedy model the reference is the
	// seed's core: its table, as the seed printed it.
	seed := countertest.Config{Arms: []fork.Arm{fork.Off, fork.On}, Replicas: 1, ForkAt: []int{3}}
	jobs = append(jobs, countertest.Job{Config: seed, Start: 0, Seeds: 300})
	refs := countertest.RunReference(t, jobs)
	if got, want := fmt.Sprint(refs[len(refs)-1].Tables), "map[3:map[on:map[all:[75 83 72 70] same_obs=false:[0 83 72 0] same_obs=true:[75 0 0 70]]]]"; got != want {
		t.Errorf("the reference with the seed's parameters prints %s, want the seed's table %s", got, want)
	}
	refs = refs[:len(refs)-1]
	for i, c := range g.Configs {
		if fmt.Sprint(refs[i].PerSeed) != fmt.Sprint(c.PerSeed) {
			t.Errorf("%s: the reference prints per-seed rows\n%v\nthe golden file has\n%v", c.Name, refs[i].PerSeed, c.PerSeed)
		}
	}
	if got := refs[len(refs)-1].Tables; fmt.Sprint(got) != fmt.Sprint(c.Tables) {
		t.Errorf("%s: the reference prints tables\n%v\nthe golden file has\n%v", c.Name, got, c.Tables)
	}
}

// Every golden parameter reaches the Go world as the reference reads it:
// a parameter dropped on the way would make the table tests fail without
// saying why.
func TestImperfectParamsReachTheWorld(t *testing.T) {
	for _, c := range countertest.Load(t).Configs {
		p := c.WorldParams(t)
		for name, v := range c.Params {
			if got, want := fmt.Sprint(p[name]), fmt.Sprint(v); got != want {
				t.Errorf("%s: %s resolved to %s, golden %s", c.Name, name, got, want)
			}
		}
		if got := counter.ParamsOf(p).WorldParams(); fmt.Sprint(got) != fmt.Sprint(p) {
			t.Errorf("%s: params %v do not round-trip (%v)", c.Name, p, got)
		}
	}
}
