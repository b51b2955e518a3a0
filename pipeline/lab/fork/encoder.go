package fork

import (
	"encoding/json"
	"fmt"
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
// Checkpoint.Encode's; TestEncoderMatchesEncode holds it to that.
type Encoder[S any] struct {
	head  []byte                      // `{"checkpoint_version":2,...,"fork_step":`
	turn  [][]byte                    // per action: `,"action":"NAME"}`
	state func(s *S, b []byte) []byte // nil: JSONAppender or json.Marshal
}

// NewEncoder prepares an Encoder for checkpoints of the world d declares,
// with params and model.
func NewEncoder[S any](d world.Declaration, params world.Params, model Model) (*Encoder[S], error) {
	b, err := json.Marshal(struct {
		Version      int          `json:"checkpoint_version"`
		World        string       `json:"world"`
		WorldVersion string       `json:"world_version"`
		Params       world.Params `json:"params"`
		Model        Model        `json:"model"`
	}{CheckpointVersion, d.Name, d.Version, params, model})
	if err != nil {
		return nil, err
	}
	head := append(b[:len(b)-1], `,"fork_step":`...)
	e := &Encoder[S]{head: head}
	for _, name := range d.Actions {
		q, _ := json.Marshal(name)
		e.turn = append(e.turn, append(append([]byte(`,"action":`), q...), '}'))
	}
	return e, nil
}

// StateJSON makes e append states with f, which must write exactly what
// json.Marshal writes for s ((*counter.State).AppendJSON does). Unlike the
// JSONAppender check it costs no interface conversion, and so no
// allocation, per checkpoint. It returns e.
func (e *Encoder[S]) StateJSON(f func(s *S, b []byte) []byte) *Encoder[S] {
	e.state = f
	return e
}

// Append appends the checkpoint at forkStep with history hist (action i
// took step i+1) and state s to b.
func (e *Encoder[S]) Append(b []byte, forkStep int, hist []world.Action, s *S) ([]byte, error) {
	b = append(b, e.head...)
	b = appendInt(b, forkStep)
	b = append(b, `,"history":[`...)
	for i, a := range hist {
		if i > 0 {
			b = append(b, ',')
		}
		if int(a) >= len(e.turn) {
			return b, fmt.Errorf("action %d has no name in the declaration", a)
		}
		b = appendInt(append(b, `{"step":`...), i+1)
		b = append(b, e.turn[a]...)
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
