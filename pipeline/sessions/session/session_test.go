package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/sessions/sessiontest"
	"github.com/forklab/forklab/pipeline/world"

	_ "github.com/forklab/forklab/pipeline/worlds/counter"
)

// run plays a session to its end (or to until steps) by folding its own
// Next events, as the agent loop does, and returns the events.
func run(t testing.TB, s *Session, until int) []Event {
	t.Helper()
	var out []Event
	for {
		e, ok, err := s.Next(until)
		if err != nil {
			t.Fatal(err)
		}
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

// config is one world configuration the fold is tested on.
type config struct {
	name  string
	world string
	raw   world.Params
	model fork.Model
}

func (c config) start(t testing.TB, seed uint64) Event {
	t.Helper()
	e, err := NewStart(c.world, c.raw, c.model, seed)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func configs() []config {
	return []config{
		{"counter seed", "counter", nil, fork.Model{NoTool: 0.5}},
		{"counter noisy", "counter", world.Params{"p_stall": 0.15, "p_obs_noise": 0.05, "p_refresh_fail": 0.2}, fork.Model{Temperature: 0.2, NoTool: 0.5}},
		{"tiny noisy", sessiontest.Name, world.Params{"goal": 5}, fork.Model{Temperature: 0.15, NoTool: 0.4}},
	}
}

// A session folded from its events ends exactly as the lab's own runner
// plays the same seed: at every fork step the fold's checkpoint is the
// runner's checkpoint JSON byte for byte, with the same features, hidden
// truth, cost and over flag, and every branch forked from the fold ends
// with the runner's success, intervention and cost — for the counter (its
// fast runner) and for a world registered only in this test.
func TestFoldMatchesTheLabsRunner(t *testing.T) {
	sessiontest.Register(t)
	for _, c := range configs() {
		t.Run(c.name, func(t *testing.T) {
			def, err := lab.Lookup(c.world)
			if err != nil {
				t.Fatal(err)
			}
			d := def.Declaration()
			p, _ := d.Resolve(c.raw)
			inst, err := def.Open(p, c.model)
			if err != nil {
				t.Fatal(err)
			}
			arms := []fork.Arm{fork.Off, fork.On, fork.AA}
			if _, ok := d.Intervention("placebo"); ok {
				arms = append(arms, fork.Placebo)
			}
			plan := lab.Plan{ForkSteps: []int{1, 2, 3, 4}, Arms: arms, Replicas: 2}
			rn, err := inst.Runner(plan)
			if err != nil {
				t.Fatal(err)
			}
			checked := 0
			err = rn.Run(context.Background(), 0, 300, func(r *lab.SeedResult) error {
				var s Session
				if err := s.Apply(c.start(t, r.Seed)); err != nil {
					t.Fatal(err)
				}
				if got := fmt.Sprint(s.Play.Task(nil)); got != fmt.Sprint(r.Task) {
					t.Fatalf("seed %d: task %s, runner %s", r.Seed, got, fmt.Sprint(r.Task))
				}
				whole := s
				run(t, &whole, 0)
				for _, f := range r.Forks {
					p := s
					run(t, &p, f.ForkStep)
					cp, err := p.Checkpoint(f.ForkStep)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(cp, f.Checkpoint) {
						t.Fatalf("seed %d fork %d: checkpoint\n%s\nrunner\n%s", r.Seed, f.ForkStep, cp, f.Checkpoint)
					}
					if fmt.Sprint(p.Play.Features(nil), p.Play.Hidden(nil), p.Play.Cost(), p.Play.Over()) != fmt.Sprint(f.Features, f.Hidden, f.Cost, f.Over) {
						t.Fatalf("seed %d fork %d: the fold's row differs from the runner's", r.Seed, f.ForkStep)
					}
					for ai, arm := range plan.Arms {
						for rep := range plan.Replicas {
							b := p
							if err := b.Apply(p.ForkEvent(f.ForkStep, arm, rep, false)); err != nil {
								t.Fatal(err)
							}
							run(t, &b, 0)
							want := f.Branches[ai*plan.Replicas+rep]
							got := lab.BranchResult{Success: *b.Outcome.Success, Intervened: b.Branch.Recovery != "", Cost: b.Play.Cost().Sub(f.Cost)}
							if fmt.Sprint(got) != fmt.Sprint(want) {
								t.Fatalf("seed %d fork %d %s/%d: fold %+v, runner %+v", r.Seed, f.ForkStep, arm, rep, got, want)
							}
							checked++
						}
					}
				}
				// The prefix forks never wrote an outcome; the whole run did.
				if !whole.Finished() || s.Finished() {
					t.Fatalf("seed %d: finished %t / %t", r.Seed, whole.Finished(), s.Finished())
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if checked != 300*4*plan.Branches() {
				t.Fatalf("checked %d branches", checked)
			}
		})
	}
}

// A branch forked from the fold ends as lab.Instance.Branch finishes the
// fold's checkpoint decoded in memory (forklab fork --checkpoint): the
// same success, cost and final observation.
func TestForkFromTheFoldMatchesForkFromItsCheckpoint(t *testing.T) {
	sessiontest.Register(t)
	for _, c := range configs() {
		def, _ := lab.Lookup(c.world)
		d := def.Declaration()
		p, _ := d.Resolve(c.raw)
		inst, _ := def.Open(p, c.model)
		for seed := uint64(0); seed < 40; seed++ {
			var s Session
			s.Apply(c.start(t, seed))
			run(t, &s, 2)
			cp, err := s.Checkpoint(2)
			if err != nil {
				t.Fatal(err)
			}
			for _, arm := range []fork.Arm{fork.Off, fork.On} {
				o, err := inst.Branch(cp, arm, 1, nil)
				if err != nil {
					t.Fatal(err)
				}
				b := s
				b.Apply(s.ForkEvent(2, arm, 1, false))
				run(t, &b, 0)
				final, _ := Canonical(o.Final)
				if o.Success != *b.Outcome.Success || !bytes.Equal(final, b.Outcome.Obs) || o.Cost != b.Play.Cost().Sub(s.Play.Cost()) {
					t.Fatalf("%s seed %d %s: fork of the checkpoint %+v %s, fold %s", c.name, seed, arm, o.BranchResult, final, b.Outcome.Encode())
				}
			}
		}
	}
}

func TestFoldRejectsForeignCorruptAndDisagreeingEvents(t *testing.T) {
	sessiontest.Register(t)
	c := configs()[0]
	start := c.start(t, 0)
	var s Session
	s.Apply(start)
	events := append([]Event{start}, run(t, &s, 0)...)
	// The counter's session 0: increment, increment, … with the sensor
	// stuck at 1, so the observation after turn 1 is {"obs":1,"steps":1}.
	obs := json.RawMessage(`{"obs":5,"steps":1}`)
	otherVersion := start
	otherVersion.WorldVersion = "1"
	otherLayout := start
	otherLayout.Version = 1
	unknownWorld := start
	unknownWorld.World = "chess"
	partial := start
	partial.Params = &world.Params{"target": 6}
	badParam := start
	badParam.Params = &world.Params{"target": 0, "base_budget": 7, "slack": []any{0}, "freeze_at": []any{0}, "p_stall": 0, "p_obs_noise": 0, "p_refresh_fail": 0}
	tinyStart := configs()[2].start(t, 0)
	for _, tc := range []struct {
		name   string
		events []Event // folded first
		e      Event
		want   string
	}{
		{"before start", nil, Event{Type: TypeModelTurn, Turn: 1, Tool: "increment"}, "model_turn event before session_start"},
		{"no type before start", nil, Event{}, `an event without a "type" before session_start`},
		{"no type after outcome", events, Event{}, `an event without a "type" after the outcome`},
		{"second start", events[:1], start, "a second session_start"},
		{"another layout", nil, otherLayout, "layout version 1; this forklab folds version 2"},
		{"another world version", nil, otherVersion, `plays world counter version "1"; this forklab plays version "2"`},
		{"unknown world", nil, unknownWorld, `unknown world "chess" (known: counter, `},
		{"params incomplete", nil, partial, "params lack base_budget, slack, freeze_at, p_stall, p_obs_noise, p_refresh_fail"},
		{"param out of range", nil, badParam, "target"},
		{"wrong tool", events[:1], Event{Type: TypeModelTurn, Turn: 1, Tool: "declare"}, "chose declare, but the model replays increment"},
		{"not a tool", events[:1], Event{Type: TypeModelTurn, Turn: 1, Tool: "refresh_all"}, `calls "refresh_all", which is not a tool of world counter`},
		{"no_tool as a tool", events[:1], Event{Type: TypeModelTurn, Turn: 1, Tool: "no_tool"}, `calls "no_tool"`},
		{"another world's tool", []Event{tinyStart}, Event{Type: TypeModelTurn, Turn: 1, Tool: "increment"}, `not a tool of world tiny (its actions: no_tool, walk, finish, peek)`},
		{"wrong turn", events[:1], Event{Type: TypeModelTurn, Turn: 2, Tool: "increment"}, "expected turn 1"},
		{"result not due", events[:1], Event{Type: TypeToolResult, Turn: 1, Tool: "increment", Obs: obs, Steps: ptr(1)}, "not due"},
		{"wrong observation", events[:2], Event{Type: TypeToolResult, Turn: 1, Tool: "increment", Obs: obs, Steps: ptr(1)}, `observation {"obs":5,"steps":1}, the replay {"obs":1,"steps":1}`},
		{"observation not JSON", events[:2], Event{Type: TypeToolResult, Turn: 1, Tool: "increment", Obs: json.RawMessage(`{"obs":`), Steps: ptr(1)}, "obs: not JSON"},
		{"no observation", events[:2], Event{Type: TypeToolResult, Turn: 1, Tool: "increment", Steps: ptr(1)}, "has no observation"},
		{"wrong steps", events[:2], Event{Type: TypeToolResult, Turn: 1, Tool: "increment", Obs: json.RawMessage(`{"obs":1,"steps":1}`), Steps: ptr(2)}, "steps 2, the replay 1"},
		{"after outcome", events, Event{Type: TypeModelTurn, Turn: 9, Tool: "increment"}, "after the outcome"},
		{"early outcome", events[:1], Event{Type: TypeOutcome, Success: ptr(true), Obs: obs, Steps: ptr(7)}, "before the run is over"},
		{"wrong outcome", events[:len(events)-1], Event{Type: TypeOutcome, Success: ptr(true), Obs: events[len(events)-1].Obs, Steps: events[len(events)-1].Steps}, "outcome (success, steps) disagrees"},
		{"wrong final observation", events[:len(events)-1], Event{Type: TypeOutcome, Success: ptr(false), Obs: obs, Steps: events[len(events)-1].Steps}, "disagrees with the replayed world: observation"},
		{"incarnation without nonce", events[:1], Event{Type: TypeIncarnation, Epoch: ptr(int64(3))}, "without an epoch and a nonce"},
		{"bad recovery", events[:3], Event{Type: TypeFork, ForkStep: 1, Arm: fork.Off, Replica: ptr(0), Recovery: "refresh"}, "cannot apply recovery"},
		{"missing recovery", events[:3], Event{Type: TypeFork, ForkStep: 1, Arm: fork.On, Replica: ptr(0)}, "arm on must apply refresh"},
		{"arm the world lacks", []Event{tinyStart}, Event{Type: TypeFork, ForkStep: 1, Arm: fork.Placebo, Replica: ptr(0)}, "world tiny has no arm placebo"},
		{"fork at the wrong step", events[:3], Event{Type: TypeFork, ForkStep: 3, Arm: fork.Off, Replica: ptr(0)}, "fork at step 3, but the run has taken 1 steps"},
		{"fork inside a turn", events[:2], Event{Type: TypeFork, ForkStep: 1, Arm: fork.Off, Replica: ptr(0)}, "in the middle of a turn"},
	} {
		var f Session
		for _, e := range tc.events {
			if err := f.Apply(e); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
		before := fmt.Sprint(f.Events, f.Started, len(f.History), f.Branch)
		err := f.Apply(tc.e)
		if !errors.Is(err, ErrFold) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want ErrFold containing %q", tc.name, err, tc.want)
		}
		if after := fmt.Sprint(f.Events, f.Started, len(f.History), f.Branch); after != before {
			t.Errorf("%s: a refused event changed the session (%s -> %s)", tc.name, before, after)
		}
	}
	for _, bad := range []string{`{"type":"chat","text":"hi"}`, `{"type":"model_turn","turn":1,"tool":"increment","mood":"ok"}`, `[1,2]`, `{"type":"outcome"`, `{"type":"outcome"} {}`} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%s) accepted a foreign event", bad)
		}
	}
}

// The same observation written with other key order or spacing is the
// same observation; another value is not.
func TestObservationsCompareAsCanonicalJSON(t *testing.T) {
	c := configs()[0]
	var s Session
	s.Apply(c.start(t, 0))
	run(t, &s, 1)
	s2 := s
	e, _, _ := s.Next(0) // run(…, 1) stopped between turns: turn 2 is next
	if e.Type != TypeModelTurn {
		t.Fatalf("next: %s", e.Encode())
	}
	s.Apply(e)
	res, _, _ := s.Next(0)
	for _, tc := range []struct {
		obs string
		ok  bool
	}{{`{"obs":1,"steps":2}`, true}, {`{ "steps" : 2, "obs" : 1 }`, true}, {`{"obs":1,"steps":2,"x":0}`, false}, {`{"obs":1.5,"steps":2}`, false}} {
		r := res
		r.Obs = json.RawMessage(tc.obs)
		err := s.Apply(r)
		if (err == nil) != tc.ok {
			t.Errorf("obs %s: %v", tc.obs, err)
		}
		if err == nil {
			s = s2
			s.Apply(e)
		}
	}
}

// Domain events are deterministic bytes: the seed's session 0 of the
// counter, pinned, and the tiny world's observation in canonical key
// order.
func TestSessionEventsGolden(t *testing.T) {
	sessiontest.Register(t)
	c := configs()[0]
	start := c.start(t, 0)
	if got := string(start.Encode()); got != `{"type":"session_start","version":2,"world":"counter","world_version":"2",`+
		`"params":{"base_budget":7,"freeze_at":[0,0,1,2],"p_obs_noise":0,"p_refresh_fail":0,"p_stall":0,"slack":[0,0,1,2],"target":6},`+
		`"model":{"temperature":0,"no_tool":0.5},"seed":0}` {
		t.Fatalf("session_start: %s", got)
	}
	var s Session
	s.Apply(start)
	var lines []string
	for _, e := range run(t, &s, 0) {
		lines = append(lines, string(e.Encode()))
	}
	got := strings.Join(lines, "\n")
	want := strings.Join([]string{
		`{"type":"model_turn","turn":1,"tool":"increment"}`,
		`{"type":"tool_result","turn":1,"tool":"increment","obs":{"obs":1,"steps":1},"steps":1}`,
		`{"type":"model_turn","turn":2,"tool":"increment"}`,
		`{"type":"tool_result","turn":2,"tool":"increment","obs":{"obs":1,"steps":2},"steps":2}`,
	}, "\n")
	if !strings.HasPrefix(got, want) || !strings.HasSuffix(got, `{"type":"outcome","obs":{"obs":1,"steps":9},"steps":9,"success":false}`) {
		t.Fatalf("session 0 events:\n%s", got)
	}
	var ts Session
	ts.Apply(configs()[2].start(t, 1))
	for _, e := range run(t, &ts, 0) {
		if e.Type == TypeToolResult {
			if !strings.HasPrefix(string(e.Obs), `{"a_note":"view","done":`) {
				t.Fatalf("tiny observation not canonical: %s", e.Obs)
			}
			break
		}
	}
}
