package session

import (
	"errors"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/worlds/counter"
)

// run plays a session to its end (or to until steps) by folding its own
// Next events, as the agent loop does, and returns the events.
func run(t *testing.T, s *Session, until int) []Event {
	t.Helper()
	var out []Event
	for {
		e, ok := s.Next(until)
		if !ok {
			return out
		}
		// Every event goes through its JSON form, as it would through the log.
		d, err := Decode(e.Encode())
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Apply(d); err != nil {
			t.Fatalf("own event %s: %v", e.Encode(), err)
		}
		out = append(out, e)
	}
}

func configs() []struct {
	p counter.Params
	m fork.Model
} {
	noisy := counter.Default()
	noisy.PStall, noisy.PObsNoise, noisy.PRefreshFail = 0.15, 0.05, 0.2
	return []struct {
		p counter.Params
		m fork.Model
	}{{counter.Default(), fork.Model{NoTool: 0.5}}, {noisy, fork.Model{Temperature: 0.2, NoTool: 0.5}}}
}

// A session folded from its events ends exactly as the in-memory run does,
// and a branch forked from the fold at step f ends as Lab.Branch does.
func TestFoldMatchesInMemoryRun(t *testing.T) {
	for _, c := range configs() {
		lab := fork.Lab[counter.State]{World: counter.World{P: c.p}, Model: c.m}
		for seed := uint64(0); seed < 400; seed++ {
			var s Session
			if err := s.Apply(Start(c.p, c.m, seed)); err != nil {
				t.Fatal(err)
			}
			run(t, &s, 0)
			want, ok := lab.Finish(lab.World.Start(seed), fork.PrefixKey(seed))
			if s.State != want || !s.Finished() || *s.Outcome.Success != ok {
				t.Fatalf("seed %d: fold %+v, in memory %+v", seed, s.State, want)
			}
			for f := 1; f <= 4; f++ {
				var p Session
				p.Apply(Start(c.p, c.m, seed))
				run(t, &p, f)
				at := lab.Advance(lab.World.Start(seed), fork.PrefixKey(seed), f, nil)
				if p.State != at {
					t.Fatalf("seed %d fork %d: fold %+v, in memory %+v", seed, f, p.State, at)
				}
				for _, arm := range []fork.Arm{fork.Off, fork.On, fork.Placebo, fork.AA} {
					for r := range 2 {
						b := p
						b.History = append([]fork.Turn(nil), p.History...)
						if err := b.Apply(ForkEvent(f, arm, r, false)); err != nil {
							t.Fatal(err)
						}
						run(t, &b, 0)
						final, ok, _ := lab.Branch(at, seed, f, arm, r, false)
						if b.State != final || *b.Outcome.Success != ok {
							t.Fatalf("seed %d fork %d %s/%d: fold %+v, in memory %+v", seed, f, arm, r, b.State, final)
						}
					}
				}
			}
		}
	}
}

func TestFoldRejectsForeignAndCorruptEvents(t *testing.T) {
	c := configs()[0]
	var s Session
	s.Apply(Start(c.p, c.m, 0))
	events := append([]Event{Start(c.p, c.m, 0)}, run(t, &s, 0)...)
	obs := int32(5)
	for _, tc := range []struct {
		name string
		at   int // fold events[:at] first
		e    Event
		want string
	}{
		{"before start", 0, Event{Type: TypeModelTurn, Turn: 1, Tool: "increment"}, "before session_start"},
		{"second start", 1, Start(c.p, c.m, 0), "a second session_start"},
		{"wrong tool", 1, Event{Type: TypeModelTurn, Turn: 1, Tool: "declare"}, "chose declare, but the model replays increment"},
		{"wrong turn", 1, Event{Type: TypeModelTurn, Turn: 2, Tool: "increment"}, "expected turn 1"},
		{"result not due", 1, Event{Type: TypeToolResult, Turn: 1, Tool: "increment", Obs: &obs, Steps: &obs}, "not due"},
		{"wrong observation", 2, Event{Type: TypeToolResult, Turn: 1, Tool: "increment", Obs: &obs, Steps: ptr(int32(1))}, "disagrees with the replayed world"},
		{"after outcome", len(events), Event{Type: TypeModelTurn, Turn: 9, Tool: "increment"}, "after the outcome"},
		{"early outcome", 1, Event{Type: TypeOutcome, Success: ptr(true), Declared: ptr(true), Value: ptr(int32(6)), Steps: ptr(int32(7))}, "before the run is over"},
		{"incarnation without nonce", 1, Event{Type: TypeIncarnation, Epoch: ptr(int64(3))}, "without an epoch and a nonce"},
		{"bad recovery", 1, Event{Type: TypeFork, ForkStep: 1, Arm: fork.Off, Replica: ptr(0), Recovery: "refresh"}, "cannot apply recovery"},
	} {
		var f Session
		for _, e := range events[:tc.at] {
			if err := f.Apply(e); err != nil {
				t.Fatal(err)
			}
		}
		before := f.Events
		err := f.Apply(tc.e)
		if !errors.Is(err, ErrFold) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want ErrFold containing %q", tc.name, err, tc.want)
		}
		if f.Events != before {
			t.Errorf("%s: a refused event changed the session", tc.name)
		}
	}
	for _, bad := range []string{`{"type":"chat","text":"hi"}`, `{"type":"model_turn","turn":1,"tool":"increment","mood":"ok"}`, `[1,2]`, `{"type":"outcome"`} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%s) accepted a foreign event", bad)
		}
	}
}

// Domain events are deterministic bytes: the seed's session 0, pinned.
func TestSessionEventsGolden(t *testing.T) {
	c := configs()[0]
	var s Session
	s.Apply(Start(c.p, c.m, 0))
	var lines []string
	for _, e := range run(t, &s, 0) {
		lines = append(lines, string(e.Encode()))
	}
	got := strings.Join(lines, "\n")
	want := strings.Join([]string{
		`{"type":"model_turn","turn":1,"tool":"increment"}`,
		`{"type":"tool_result","turn":1,"tool":"increment","obs":1,"steps":1}`,
		`{"type":"model_turn","turn":2,"tool":"increment"}`,
		`{"type":"tool_result","turn":2,"tool":"increment","obs":1,"steps":2}`,
	}, "\n")
	if !strings.HasPrefix(got, want) || !strings.HasSuffix(got, `{"type":"outcome","steps":9,"success":false,"declared":false,"value":9}`) {
		t.Fatalf("session 0 events:\n%s", got)
	}
}
