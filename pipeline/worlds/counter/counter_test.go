package counter_test

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/worlds/counter"
)

// AppendJSON writes json.Marshal's bytes for the states a run goes through
// and for extreme field values (negative, multi-digit, the largest seed),
// and AppendObservation json.Marshal's bytes of their observations.
func TestAppendJSONMatchesMarshal(t *testing.T) {
	states := []counter.State{
		{},
		{Seed: math.MaxUint64, Target: math.MaxInt32, Budget: math.MinInt32, Steps: -1, V: -9, Obs: -10,
			FreezeAt: 10, Frozen: true, Declared: true, SameObs: true, RepeatRun: 99, Attempts: 100, Reads: 1000, Refreshes: 12345},
	}
	for _, c := range labConfigs() {
		lab := counter.Lab{World: counter.World{P: c.p}, Model: c.model}
		for seed := uint64(0); seed < 300; seed++ {
			s := lab.World.Start(seed)
			for f := 1; f <= 10; f++ {
				lab.Advance(&s, fork.PrefixKey(seed), f, nil)
				states = append(states, s)
				var final counter.State
				lab.Branch(&final, &s, seed, f, fork.On, 0, false)
				states = append(states, final)
			}
		}
	}
	for _, s := range states {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.AppendJSON([]byte("x")); string(got) != "x"+string(want) {
			t.Fatalf("%+v:\nAppendJSON   %s\njson.Marshal %s", s, got[1:], want)
		}
		// The observation, as transcripts hold it.
		if want, err = json.Marshal(counter.World{}.Observe(&s)); err != nil {
			t.Fatal(err)
		}
		if got := counter.AppendObservation(&s, []byte("x")); string(got) != "x"+string(want) {
			t.Fatalf("%+v:\nAppendObservation %s\njson.Marshal      %s", s, got[1:], want)
		}
	}
}
