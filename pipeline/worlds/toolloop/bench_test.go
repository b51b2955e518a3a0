package toolloop_test

import (
	"testing"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/pipeline/worlds/counter"
	"github.com/forklab/forklab/pipeline/worlds/toolloop"
)

// counterSeedsPerSecond is the baseline BenchmarkLab's toolloop figures
// are compared with: the seed's counter world through the same fork.Lab.
var counterSeedsPerSecond float64

// benchSeeds is the batch of seeds one iteration plays.
const benchSeeds = 1 << 14

// playSeeds plays seeds [0, benchSeeds) through lab as a sweep does: the
// run to fork step 2 with its history, the checkpoint's features, hidden
// truth and task, then a branch per arm. With starts, the start states are
// taken from it instead of drawn (the counter draws its tasks with
// Python's Mersenne Twister, which the sweep seeds in batches: its own
// BenchmarkLab leaves that out too).
func playSeeds[S any](lab fork.Lab[S], starts []S, arms []fork.Arm) int {
	var s, final S
	hist := make([]world.Action, 0, 64)
	vals := make([]world.Value, 0, 32)
	wins := 0
	for seed := range uint64(benchSeeds) {
		if starts != nil {
			s = starts[seed]
		} else {
			s = lab.World.Start(seed)
		}
		hist = hist[:0]
		lab.Advance(&s, fork.PrefixKey(seed), 2, &hist)
		vals = lab.World.Features(&s, vals[:0])
		vals = lab.World.Hidden(&s, vals)
		vals = lab.World.Task(&s, vals)
		for _, arm := range arms {
			if ok, _ := lab.Branch(&final, &s, seed, 2, arm, 0, true); ok {
				wins++
			}
		}
	}
	return wins
}

// BenchmarkLab measures seeds per second through fork.Lab at fork step 2,
// on one goroutine (a 2-core machine shared with others gives noisy
// figures: compare runs made side by side). world=counter is the baseline,
// the seed's world through the same generic lab; the toolloop
// sub-benchmarks report their ratio to it (x_counter: run the counter one
// in the same invocation). start=drawn includes drawing the tasks.
//
//	go test ./pipeline/worlds/toolloop -run '^$' -bench Lab
func BenchmarkLab(b *testing.B) {
	offOn := []fork.Arm{fork.Off, fork.On}
	all := []fork.Arm{fork.Off, fork.On, fork.Placebo, fork.AA}
	report := func(b *testing.B, baseline bool) {
		perSec := float64(b.N*benchSeeds) / b.Elapsed().Seconds()
		b.ReportMetric(perSec, "seeds/s")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchSeeds), "ns/seed")
		if baseline {
			counterSeedsPerSecond = perSec
		} else if counterSeedsPerSecond > 0 {
			b.ReportMetric(perSec/counterSeedsPerSecond, "x_counter")
		}
	}
	b.Run("world=counter/arms=off,on", func(b *testing.B) {
		lab, err := fork.NewLab[counter.State](counter.World{P: counter.Default()}, fork.Model{})
		if err != nil {
			b.Fatal(err)
		}
		starts := make([]counter.State, benchSeeds)
		for i := range starts {
			starts[i] = lab.World.Start(uint64(i))
		}
		for b.Loop() {
			playSeeds(lab, starts, offOn)
		}
		report(b, true)
	})
	for _, tc := range []struct {
		name  string
		m     fork.Model
		arms  []fork.Arm
		drawn bool
	}{
		{"world=toolloop/arms=off,on", fork.Model{}, offOn, false},
		{"world=toolloop/arms=off,on/start=drawn", fork.Model{}, offOn, true},
		{"world=toolloop/arms=off,on,placebo,aa", fork.Model{}, all, false},
		{"world=toolloop/arms=off,on/temperature=0.1", fork.Model{Temperature: 0.1, NoTool: 0.5}, offOn, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			lab := newLab(b, toolloop.Default(), tc.m)
			var starts []toolloop.State
			if !tc.drawn {
				starts = make([]toolloop.State, benchSeeds)
				for i := range starts {
					starts[i] = lab.World.Start(uint64(i))
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				playSeeds(lab, starts, tc.arms)
			}
			report(b, false)
		})
	}
}
