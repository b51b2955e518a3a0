package counter_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/pipeline/worlds/counter"
)

// labConfigs are the configurations the fast Lab is held to fork.Lab on:
// the seed's, a noisy model, an imperfect world, both at once with other
// task distributions, and a model that always departs.
func labConfigs() []struct {
	name  string
	p     counter.Params
	model fork.Model
} {
	imperfect := counter.Default()
	imperfect.PStall, imperfect.PObsNoise, imperfect.PRefreshFail = 0.2, 0.1, 0.3
	wide := imperfect
	wide.Target, wide.BaseBudget = 4, 5
	wide.Slack, wide.FreezeAt = []int{0, 1, 3, 6}, []int{0, 1, 2, 3, 5}
	return []struct {
		name  string
		p     counter.Params
		model fork.Model
	}{
		{"seed", counter.Default(), fork.Model{NoTool: 0.5}},
		{"noisy", counter.Default(), fork.Model{Temperature: 0.25, NoTool: 0.5}},
		{"imperfect", imperfect, fork.Model{NoTool: 0.5}},
		{"noisy imperfect", wide, fork.Model{Temperature: 0.4, NoTool: 0.3}},
		{"always departs", imperfect, fork.Model{Temperature: 1, NoTool: 0}},
		{"always no tool", counter.Default(), fork.Model{Temperature: 1, NoTool: 1}},
	}
}

// The fast Lab makes exactly fork.Lab's moves: the same state and history at
// every fork step (advanced step after step, as the sweep does), and the
// same final state, success and intervention on every arm and replica, with
// the guard rule firing and not.
func TestLabMatchesForkLab(t *testing.T) {
	compared := 0
	for _, c := range labConfigs() {
		w := counter.World{P: c.p}
		ref, err := fork.NewLab[counter.State](w, c.model)
		if err != nil {
			t.Fatal(err)
		}
		fast := counter.Lab{World: w, Model: c.model}
		for seed := uint64(0); seed < 2000; seed++ {
			start := w.Start(seed)
			s1, s2 := start, start
			var h1, h2 []world.Action
			for f := 1; f <= 12; f++ {
				ref.Advance(&s1, fork.PrefixKey(seed), f, &h1)
				fast.Advance(&s2, fork.PrefixKey(seed), f, &h2)
				if s1 != s2 || !slices.Equal(h1, h2) {
					t.Fatalf("%s seed %d fork %d: Advance\nfork.Lab %+v %v\nLab      %+v %v", c.name, seed, f, s1, h1, s2, h2)
				}
				n := start
				if fast.Advance(&n, fork.PrefixKey(seed), f, nil); n != s2 {
					t.Fatalf("%s seed %d fork %d: Advance from the start %+v, step by step %+v", c.name, seed, f, n, s2)
				}
				for _, arm := range fork.Arms {
					for r := range 3 {
						for _, fires := range []bool{false, true} {
							var f1, f2 counter.State
							ok1, iv1 := ref.Branch(&f1, &s1, seed, f, arm, r, fires)
							before := s2
							ok2, iv2 := fast.Branch(&f2, &s2, seed, f, arm, r, fires)
							if s2 != before {
								t.Fatalf("%s seed %d fork %d arm %s: Branch changed the checkpoint state", c.name, seed, f, arm)
							}
							if f1 != f2 || ok1 != ok2 || iv1 != iv2 {
								t.Fatalf("%s seed %d fork %d arm %s replica %d fires %t: Branch\nfork.Lab %+v %t %t\nLab      %+v %t %t",
									c.name, seed, f, arm, r, fires, f1, ok1, iv1, f2, ok2, iv2)
							}
							compared++
						}
					}
				}
			}
		}
	}
	if compared != 6*2000*12*len(fork.Arms)*3*2 {
		t.Fatalf("compared %d branches", compared)
	}
}

// The noisy configurations (temperature strictly between 0 and 1) do
// exercise noise: some branches of the same checkpoint differ by replica,
// so a Lab that ignored its key would fail the comparison above. (At
// temperature 1 with two tools every turn departs to the one other choice,
// which needs no draw beyond the first.)
func TestLabConfigsAreNoisy(t *testing.T) {
	for _, c := range labConfigs()[1:] {
		if c.model.Temperature == 0 || c.model.Temperature == 1 {
			continue
		}
		lab := counter.Lab{World: counter.World{P: c.p}, Model: c.model}
		differ := 0
		for seed := uint64(0); seed < 200; seed++ {
			s := lab.World.Start(seed)
			lab.Advance(&s, fork.PrefixKey(seed), 2, nil)
			var a, b counter.State
			lab.Branch(&a, &s, seed, 2, fork.Off, 0, false)
			lab.Branch(&b, &s, seed, 2, fork.Off, 1, false)
			if a != b {
				differ++
			}
		}
		if differ == 0 {
			t.Errorf("%s: no replica differs; the comparison would not see the noise key", c.name)
		}
	}
}

// BenchmarkLab plays the seed's experiment (fork step 3, arms off and on)
// with the generic fork.Lab and with Lab, per seed.
func BenchmarkLab(b *testing.B) {
	w := counter.World{P: counter.Default()}
	starts := make([]counter.State, 1<<16)
	for i := range starts {
		starts[i] = w.Start(uint64(i))
	}
	var hist []world.Action
	var final counter.State
	b.Run("lab=fork", func(b *testing.B) {
		lab, _ := fork.NewLab[counter.State](w, fork.Model{NoTool: 0.5})
		for b.Loop() {
			for seed, s := range starts {
				hist = hist[:0]
				lab.Advance(&s, fork.PrefixKey(uint64(seed)), 3, &hist)
				lab.Branch(&final, &s, uint64(seed), 3, fork.Off, 0, false)
				lab.Branch(&final, &s, uint64(seed), 3, fork.On, 0, false)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(starts)), "ns/seed")
	})
	b.Run("lab=counter", func(b *testing.B) {
		lab := &counter.Lab{World: w, Model: fork.Model{NoTool: 0.5}}
		for b.Loop() {
			for seed, s := range starts {
				hist = hist[:0]
				lab.Advance(&s, fork.PrefixKey(uint64(seed)), 3, &hist)
				lab.Branch(&final, &s, uint64(seed), 3, fork.Off, 0, false)
				lab.Branch(&final, &s, uint64(seed), 3, fork.On, 0, false)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(starts)), "ns/seed")
	})
}

// The counter's own runner (pyrand batches, its fast Lab) fills every seed
// result exactly as the generic in-process runner of lab.Builtin does:
// tasks, checkpoints byte for byte, features, hidden truth, costs, policy
// verdicts and every branch, its transcript too when the plan asks (the
// generic one marshals observations with encoding/json).
func TestRunnerMatchesBuiltin(t *testing.T) {
	generic := lab.Builtin[counter.State]{Decl: counter.Declaration(), New: func(p world.Params) (world.World[counter.State], error) {
		return counter.New(counter.ParamsOf(p))
	}}
	fires := func(f []world.Value) bool { return f[1].I >= 2 } // repeat_run >= 2
	for _, c := range labConfigs() {
		wp := c.p.WorldParams()
		plan := lab.Plan{ForkSteps: []int{1, 2, 4, 7}, Arms: []fork.Arm{fork.Off, fork.On, fork.Placebo, fork.AA, fork.Policy}, Replicas: 3, Fires: fires}
		a, err := counter.Definition.Open(wp, c.model)
		if err != nil {
			t.Fatal(err)
		}
		b, err := generic.Open(wp, c.model)
		if err != nil {
			t.Fatal(err)
		}
		for _, transcripts := range []bool{false, true} {
			plan.Transcripts = transcripts
			ra, _ := a.Runner(plan)
			rb, _ := b.Runner(plan)
			var got []string
			ctx := context.Background()
			if err := ra.Run(ctx, 500, 1800, func(r *lab.SeedResult) error { got = append(got, fmt.Sprintf("%+v", *r)); return nil }); err != nil {
				t.Fatal(err)
			}
			i := 0
			if err := rb.Run(ctx, 500, 1800, func(r *lab.SeedResult) error {
				if want := fmt.Sprintf("%+v", *r); got[i] != want {
					t.Fatalf("%s seed %d transcripts %t:\ncounter %s\nbuiltin %s", c.name, r.Seed, transcripts, got[i], want)
				}
				if transcripts && len(r.Forks[0].Branches[0].Transcript) == 0 {
					t.Fatalf("%s seed %d: no transcript", c.name, r.Seed)
				}
				i++
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if i != 1300 {
				t.Fatalf("%d seeds", i)
			}
		}
	}
}
