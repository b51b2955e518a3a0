// Package session is an agent session as a log of events, and the fold that
// turns the events back into the run's exact state: the second half of "a
// checkpoint is data". A worker that is killed and restarted reads its
// session's events, folds them, and continues exactly where the dead one
// stopped; a fork of the session at any offset is the fold of the events
// before it.
//
// Like the world's step function the fold is pure: Session.Apply takes one
// event and checks it against the world's own replay, and Session.Next says
// which event the agent loop appends next. Reading and appending belong to
// the caller (package agent).
//
// A session's events, in order (schemas/session_event.md):
//
//	incarnation   a worker incarnation took over (epoch, nonce); not a
//	              domain event: it fences older incarnations
//	session_start the task: world, parameters, model, seed
//	fork          this stream is a branch: fork step, arm, replica
//	recovery      the arm's intervention at the fork (refresh or nop)
//	model_turn    the model's choice: a tool, or null for no tool call
//	tool_result   the tool's effect: observation and steps after it
//	outcome       the run ended: success, declared, value, steps
package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/worlds/counter"
)

// Version is the session event layout version, carried by session_start.
const Version = 1

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

// Event is one session event. Type says which fields are set; the JSON
// omits the others. Every field is deterministic except Nonce and At, which
// only incarnation events carry, so two runs of a session write the same
// domain events byte for byte.
type Event struct {
	Type string `json:"type"`

	// incarnation
	Epoch *int64 `json:"epoch,omitempty"`
	Nonce string `json:"nonce,omitempty"`
	PID   int    `json:"pid,omitempty"`
	At    string `json:"at,omitempty"`

	// session_start
	Version int             `json:"version,omitempty"`
	World   string          `json:"world,omitempty"`
	Params  *counter.Params `json:"params,omitempty"`
	Model   *fork.Model     `json:"model,omitempty"`
	Seed    *uint64         `json:"seed,omitempty"`

	// fork: the branch's fork step, arm and replica, and the recovery
	// action the arm applies at the fork ("" for none).
	ForkStep int      `json:"fork_step,omitempty"`
	Arm      fork.Arm `json:"arm,omitempty"`
	Replica  *int     `json:"replica,omitempty"`
	Recovery string   `json:"recovery,omitempty"`

	// model_turn, tool_result, recovery: Turn is the step the action uses
	// (1-based). Tool is the tool a model turn calls, or a tool_result's
	// tool; NoTool marks a model turn that called no tool (it uses its
	// step and has no tool_result). Action is a recovery's action.
	Turn   int    `json:"turn,omitempty"`
	Tool   string `json:"tool,omitempty"`
	NoTool bool   `json:"no_tool,omitempty"`
	Action string `json:"action,omitempty"`
	Obs    *int32 `json:"obs,omitempty"`
	Steps  *int32 `json:"steps,omitempty"`

	// outcome
	Success  *bool  `json:"success,omitempty"`
	Declared *bool  `json:"declared,omitempty"`
	Value    *int32 `json:"value,omitempty"`
}

// Encode returns the event as compact JSON.
func (e Event) Encode() []byte {
	b, err := json.Marshal(e)
	if err != nil {
		panic(fmt.Sprintf("session: encode event: %v", err)) // no field can fail
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
	switch e.Type {
	case TypeIncarnation, TypeStart, TypeFork, TypeRecovery, TypeModelTurn, TypeToolResult, TypeOutcome:
		return e, nil
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

func ptr[T any](v T) *T { return &v }
