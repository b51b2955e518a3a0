// Package session is an agent session as a log of events, and the fold that
// turns the events back into the run's exact state: the second half of "a
// checkpoint is data". A worker that is killed and restarted reads its
// session's events, folds them, and continues exactly where the dead one
// stopped; a fork of the session at any offset is the fold of the events
// before it.
//
// The fold works for any world the lab's registry knows (lab.Lookup): the
// session_start event names the world, its version and its parameters, and
// the fold opens that world and replays every action through its own step
// function (lab.Play). Nothing here knows a world's state, features or
// observations beyond their JSON.
//
// Like the world's step function the fold is pure: Session.Apply takes one
// event and checks it against the world's own replay, and Session.Next says
// which event the agent loop appends next. Reading and appending belong to
// the caller (package agent).
//
// A session's events, in order (schemas/session-event.schema.json, layout
// Version 2):
//
//	incarnation   a worker incarnation took over (epoch, nonce); not a
//	              domain event: it fences older incarnations
//	session_start the task: world, world_version, params, model, seed
//	fork          this stream is a branch: fork step, arm, replica and
//	              the recovery the arm applies
//	recovery      the arm's intervention at the fork: action, then the
//	              observation and steps after it
//	model_turn    the model's choice: a tool by action name, or no_tool
//	tool_result   the tool's effect: the observation and steps after it
//	outcome       the run ended: success, steps, the final observation
package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
)

// Version is the session event layout version, carried by session_start.
// Version 2 is generic over worlds: session_start names the world's version
// and holds its parameters as the declaration's Params; tool_result,
// recovery and outcome carry the world's observation as JSON (obs) instead
// of the counter's reading, and outcome drops the counter's declared and
// value. A fold refuses a session of another version.
const Version = 2

// The event types.
const (
	TypeIncarnation = "incarnation"
	TypeStart       = "session_start"
	TypeFork        = "fork"
	TypeRecovery    = "recovery"
	TypeModelTurn   = "model_turn"
	TypeToolResult  = "tool_result"
	TypeOutcome     = "outcome"
)

// Types lists the event types in the order a session meets them.
var Types = []string{TypeIncarnation, TypeStart, TypeFork, TypeRecovery, TypeModelTurn, TypeToolResult, TypeOutcome}

// Event is one session event. Type says which fields are set; the JSON
// omits the others. Every field is deterministic except Nonce, PID and At,
// which only incarnation events carry, so two runs of a session write the
// same domain events byte for byte.
type Event struct {
	Type string `json:"type"`

	// incarnation
	Epoch *int64 `json:"epoch,omitempty"`
	Nonce string `json:"nonce,omitempty"`
	PID   int    `json:"pid,omitempty"`
	At    string `json:"at,omitempty"`

	// session_start: the layout version, the world (name and version, as
	// its declaration gives them), every one of its parameters in their
	// canonical types (world.Declaration.Resolve), the fake model's noise
	// and the task seed.
	Version      int           `json:"version,omitempty"`
	World        string        `json:"world,omitempty"`
	WorldVersion string        `json:"world_version,omitempty"`
	Params       *world.Params `json:"params,omitempty"`
	Model        *fork.Model   `json:"model,omitempty"`
	Seed         *uint64       `json:"seed,omitempty"`

	// fork: the branch's fork step, arm and replica, and the name of the
	// action the arm applies at the fork ("" for none).
	ForkStep int      `json:"fork_step,omitempty"`
	Arm      fork.Arm `json:"arm,omitempty"`
	Replica  *int     `json:"replica,omitempty"`
	Recovery string   `json:"recovery,omitempty"`

	// model_turn, tool_result, recovery: Turn is the step the action
	// uses (1-based: the run's steps before it, plus one). Tool is the
	// action a model turn calls, by its name in the world's declaration
	// (world.Declaration.Actions), or a tool_result's; NoTool marks a
	// model turn that called no tool (action 0, "no_tool": it uses its
	// step and has no tool_result). Action is a recovery's action.
	Turn   int    `json:"turn,omitempty"`
	Tool   string `json:"tool,omitempty"`
	NoTool bool   `json:"no_tool,omitempty"`
	Action string `json:"action,omitempty"`
	// Obs is what the agent sees after the action (tool_result,
	// recovery) or at the end (outcome): the world's Observe as canonical
	// JSON (Canonical). Steps is the run's step count after it.
	Obs   json.RawMessage `json:"obs,omitempty"`
	Steps *int            `json:"steps,omitempty"`

	// outcome
	Success *bool `json:"success,omitempty"`
}

// Encode returns the event as compact JSON.
func (e Event) Encode() []byte {
	b, err := json.Marshal(e)
	if err != nil {
		panic(fmt.Sprintf("session: encode event: %v", err)) // Obs is checked JSON; nothing else can fail
	}
	return b
}

// Decode decodes one event strictly: unknown fields and trailing data are
// errors, as is an unknown type.
func Decode(b []byte) (Event, error) {
	var e Event
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&e); err != nil {
		return e, fmt.Errorf("not a session event: %v", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return e, fmt.Errorf("not a session event: trailing data")
	}
	for _, t := range Types {
		if e.Type == t {
			return e, nil
		}
	}
	return e, fmt.Errorf("not a session event: unknown type %q", e.Type)
}

// DecodeBatch decodes a JSON array of events, as a JSON-mode read returns
// them.
func DecodeBatch(b []byte) ([]Event, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("not a JSON array of session events: %v", err)
	}
	out := make([]Event, 0, len(raw))
	for i, r := range raw {
		e, err := Decode(r)
		if err != nil {
			return out, fmt.Errorf("message %d: %w", i, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// Canonical returns JSON value b in canonical form: compact, object keys
// sorted, numbers as written. Two observations are the same when their
// canonical forms are equal bytes. It fails on anything that is not one
// JSON value.
func Canonical(b []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("not one JSON value: trailing data")
	}
	return json.Marshal(v)
}

// observe returns what the agent sees in p, as canonical JSON.
func observe(p interface{ Observe() any }) (json.RawMessage, error) {
	b, err := json.Marshal(p.Observe())
	if err != nil {
		return nil, fmt.Errorf("the world's observation is not JSON: %v", err)
	}
	return Canonical(b)
}

func ptr[T any](v T) *T { return &v }
