package fork_test

import (
	"math"
	"testing"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/pipeline/worlds/counter"
)

// The encoder as the sweep sets it up (StateJSON with counter.State's own
// appender) writes exactly what Checkpoint.Encode writes: for noisy models
// whose histories hold every model action, imperfect worlds, fork steps up
// to 12, and seeds above 2^32 up to the largest the seed column holds.
func TestFastEncoderMatchesEncode(t *testing.T) {
	p := counter.Default()
	p.PStall, p.PObsNoise, p.PRefreshFail = 0.2, 0.1, 0.3
	seeds := []uint64{1 << 32, 1<<32 + 1, math.MaxInt64 - 1, math.MaxInt64}
	for s := uint64(0); s < 400; s++ {
		seeds = append(seeds, s)
	}
	actions := map[world.Action]bool{}
	for _, tc := range []struct {
		p counter.Params
		m fork.Model
	}{
		{counter.Default(), fork.Model{NoTool: 0.5}},
		{p, fork.Model{Temperature: 0.3, NoTool: 0.5}},
		{counter.Default(), fork.Model{Temperature: 1, NoTool: 0.25}},
	} {
		lab := counter.Lab{World: counter.World{P: tc.p}, Model: tc.m}
		enc, err := fork.NewEncoder[counter.State](counter.Name, tc.p, tc.m)
		if err != nil {
			t.Fatal(err)
		}
		enc.StateJSON(counter.State.AppendJSON)
		buf := []byte("prefix")
		for _, seed := range seeds {
			var hist []fork.Turn
			s := lab.World.Start(seed)
			for f := 1; f <= 12; f++ {
				lab.Advance(&s, fork.PrefixKey(seed), f, &hist)
				for _, t := range hist {
					actions[t.Action] = true
				}
				want, err := fork.Checkpoint[counter.State, counter.Params]{Version: fork.CheckpointVersion, World: counter.Name,
					Params: tc.p, Model: tc.m, ForkStep: f, History: hist, State: s}.Encode()
				if err != nil {
					t.Fatal(err)
				}
				got, err := enc.Append(buf[:6], f, hist, s)
				if err != nil || string(got[6:]) != string(want) || string(got[:6]) != "prefix" {
					t.Fatalf("seed %d fork %d: encoder wrote (%v)\n%s\nEncode wrote\n%s", seed, f, err, got, want)
				}
				buf = got
			}
		}
	}
	for _, a := range []world.Action{world.Increment, world.Declare, world.NoTool} {
		if !actions[a] {
			t.Errorf("no history held action %s", a)
		}
	}
}

// A history entry whose action has no name fails as Encode fails.
func TestEncoderRejectsUnknownAction(t *testing.T) {
	hist := []fork.Turn{{Step: 1, Action: world.Action(200), Obs: 0}}
	_, want := fork.Checkpoint[counter.State, counter.Params]{Version: 1, World: counter.Name, Params: counter.Default(),
		ForkStep: 1, History: hist}.Encode()
	enc, _ := fork.NewEncoder[counter.State](counter.Name, counter.Default(), fork.Model{})
	_, got := enc.Append(nil, 1, hist, counter.State{})
	if want == nil || got == nil || got.Error() != want.Error() {
		t.Fatalf("encoder error %v, Encode error %v", got, want)
	}
}
