package lab

import (
	"encoding/json"
	"strconv"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
)

// A transcript is what a branch did after its fork, step by step: a JSON
// array of step objects, the shape docs/agent-protocol.md ("Transcripts")
// and schemas/agent-protocol/branch.result.schema.json define for agents
// and built-in worlds alike:
//
//	[{"step":4,"action":"refresh","intervention":true,"observation":{"obs":3,"steps":4},"cost":{"steps":1}},
//	 {"step":5,"action":"increment","observation":{"obs":4,"steps":5},"cost":{"steps":1}}, …]
//
// step is the run's step count after the step; action the declared action
// taken (the arm's intervention, marked intervention: true, comes first);
// observation what the agent sees after it (the world's Observe); cost
// what the step cost, in the fields the world's cost model reports. An
// agent may also give tool_call ({"name", "arguments"}) and tool_result.
// The branches table keeps it in its transcript column; forklab show prints
// it beside the control's.

// TranscriptEncoder appends the transcript of a built-in world's branch as
// JSON while the branch is played, without reflection when the world gives
// its observations' JSON (Builtin.ObservationJSON). One encoder serves one
// goroutine; its buffer is the caller's.
type TranscriptEncoder[S any] struct {
	w        world.World[S]
	actions  []string
	reported [4]bool
	obs      func(s *S, b []byte) []byte
	b        []byte
	prev     world.Cost
	err      error
}

// NewTranscriptEncoder returns the encoder of w's branches: obs appends a
// state's observation as JSON (the bytes json.Marshal writes of
// w.Observe), or is nil to marshal w.Observe.
func NewTranscriptEncoder[S any](w world.World[S], obs func(s *S, b []byte) []byte) *TranscriptEncoder[S] {
	d := w.Declaration()
	e := &TranscriptEncoder[S]{w: w, actions: d.Actions, obs: obs}
	for i, f := range world.CostFields {
		e.reported[i] = d.Cost.Reports(f)
	}
	return e
}

// Begin starts a transcript in dst (its content is replaced) for a branch
// forked from a state whose cost so far is at.
func (e *TranscriptEncoder[S]) Begin(dst []byte, at world.Cost) {
	e.b, e.prev, e.err = append(dst[:0], '['), at, nil
}

// Step appends the step that took action a (the arm's intervention when
// intervention is set) and left the run in state s.
func (e *TranscriptEncoder[S]) Step(a world.Action, intervention bool, s *S) {
	b := e.b
	if len(b) > 1 {
		b = append(b, ',')
	}
	b = append(b, `{"step":`...)
	b = strconv.AppendInt(b, int64(e.w.Steps(s)), 10)
	b = append(b, `,"action":"`...)
	if int(a) < len(e.actions) {
		b = append(b, e.actions[a]...) // a declared name: [a-z][a-z0-9_]*
	} else {
		b = strconv.AppendInt(append(b, "action_"...), int64(a), 10)
	}
	b = append(b, '"')
	if intervention {
		b = append(b, `,"intervention":true`...)
	}
	b = append(b, `,"observation":`...)
	if e.obs != nil {
		b = e.obs(s, b)
	} else if j, err := json.Marshal(e.w.Observe(s)); err != nil {
		e.err = err
		b = append(b, "null"...)
	} else {
		b = append(b, j...)
	}
	c := e.w.Cost(s)
	b = AppendCost(append(b, `,"cost":`...), c.Sub(e.prev), e.reported)
	e.prev = c
	e.b = append(b, '}')
}

// End closes the transcript and returns it, with the first error an
// observation could not be encoded with.
func (e *TranscriptEncoder[S]) End() ([]byte, error) {
	e.b = append(e.b, ']')
	return e.b, e.err
}

// Trace returns a fork.Trace that appends every step to e.
func (e *TranscriptEncoder[S]) Trace() fork.Trace[S] { return e.Step }

// AppendCost appends c as a JSON cost object holding the fields reported
// says (in world.CostFields order): {"steps":1,"tokens":230}. Integers are
// written as integers, amounts as encoding/json writes a float64.
func AppendCost(b []byte, c world.Cost, reported [4]bool) []byte {
	b = append(b, '{')
	first := true
	key := func(name string) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(append(append(b, '"'), name...), `":`...)
	}
	if reported[0] {
		key(world.CostSteps)
		b = strconv.AppendInt(b, c.Steps, 10)
	}
	if reported[1] {
		key(world.CostTokens)
		b = strconv.AppendInt(b, c.Tokens, 10)
	}
	for i, v := range [2]float64{c.USD, c.Seconds} {
		if reported[2+i] {
			key(world.CostFields[2+i])
			j, _ := json.Marshal(v) // finite: costs are sums of finite amounts
			b = append(b, j...)
		}
	}
	return append(b, '}')
}
