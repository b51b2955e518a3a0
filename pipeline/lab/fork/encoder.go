package fork

import (
	"encoding/json"
	"strconv"

	"github.com/forklab/forklab/pipeline/world"
)

// JSONAppender is implemented by state types that can append their own JSON
// encoding, byte-identical to json.Marshal's, without reflection.
type JSONAppender interface {
	AppendJSON(b []byte) []byte
}

// Encoder encodes many checkpoints that share a world, its parameters and a
// model, as a sweep does: the shared head is encoded once, the history is
// written from precomputed pieces, and the state is appended by the
// function given to StateJSON, by its JSONAppender method, or by
// json.Marshal, in that order of preference. The bytes equal
// Checkpoint.Encode's; TestEncoderMatchesEncode and TestFastEncoderMatchesEncode
// hold it to that.
type Encoder[S, P any] struct {
	head  []byte                     // `{"checkpoint_version":1,...,"fork_step":`
	turn  [][]byte                   // per action: `,"action":"NAME","obs":`
	state func(s S, b []byte) []byte // nil: JSONAppender or json.Marshal
}

// NewEncoder prepares an Encoder for checkpoints of world with params and
// model.
func NewEncoder[S, P any](world string, params P, model Model) (*Encoder[S, P], error) {
	b, err := json.Marshal(struct {
		Version int    `json:"checkpoint_version"`
		World   string `json:"world"`
		Params  P      `json:"params"`
		Model   Model  `json:"model"`
	}{CheckpointVersion, world, params, model})
	if err != nil {
		return nil, err
	}
	head := append(b[:len(b)-1], `,"fork_step":`...)
	return &Encoder[S, P]{head: head, turn: turnPieces()}, nil
}

// turnPieces returns the middle of a history entry for every action with a
// name, indexed by action: what json.Marshal writes between the step and
// the observation.
func turnPieces() [][]byte {
	var pieces [][]byte
	for a := world.Action(0); ; a++ {
		name, err := a.MarshalText()
		if err != nil {
			return pieces
		}
		q, _ := json.Marshal(string(name))
		pieces = append(pieces, append(append([]byte(`,"action":`), q...), `,"obs":`...))
	}
}

// StateJSON makes e append states with f, which must write exactly what
// json.Marshal writes for s (counter.State.AppendJSON does). Unlike the
// JSONAppender check it costs no interface conversion, and so no
// allocation, per checkpoint. It returns e.
func (e *Encoder[S, P]) StateJSON(f func(s S, b []byte) []byte) *Encoder[S, P] {
	e.state = f
	return e
}

// Append appends the checkpoint at forkStep with history hist and state s
// to b.
func (e *Encoder[S, P]) Append(b []byte, forkStep int, hist []Turn, s S) ([]byte, error) {
	b = append(b, e.head...)
	b = appendInt(b, forkStep)
	b = append(b, `,"history":[`...)
	for i, t := range hist {
		if i > 0 {
			b = append(b, ',')
		}
		if int(t.Action) >= len(e.turn) { // no name: json.Marshal's error
			_, err := json.Marshal(t.Action)
			return b, err
		}
		b = appendInt(append(b, `{"step":`...), t.Step)
		b = appendInt(append(b, e.turn[t.Action]...), t.Obs)
		b = append(b, '}')
	}
	b = append(b, `],"state":`...)
	switch {
	case e.state != nil:
		b = e.state(s, b)
	default:
		if a, ok := any(s).(JSONAppender); ok {
			b = a.AppendJSON(b)
			break
		}
		sj, err := json.Marshal(s)
		if err != nil {
			return b, err
		}
		b = append(b, sj...)
	}
	return append(b, '}'), nil
}

// appendInt appends v in decimal, as strconv.AppendInt does, taking a
// shortcut for the small values histories are made of.
func appendInt(b []byte, v int) []byte {
	switch {
	case uint(v) < 10:
		return append(b, byte('0'+v))
	case uint(v) < 100:
		return append(b, byte('0'+v/10), byte('0'+v%10))
	}
	return strconv.AppendInt(b, int64(v), 10)
}
