package fork

import (
	"encoding/json"
	"strconv"
)

// JSONAppender is implemented by state types that can append their own JSON
// encoding, byte-identical to json.Marshal's, without reflection.
type JSONAppender interface {
	AppendJSON(b []byte) []byte
}

// Encoder encodes many checkpoints that share a world, its parameters and a
// model, as a sweep does: the shared head is encoded once, and the rest is
// appended by hand when S implements JSONAppender (by json.Marshal
// otherwise). The bytes equal Checkpoint.Encode's; the tests hold it to that.
type Encoder[S, P any] struct {
	head []byte
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
	return &Encoder[S, P]{head: head}, nil
}

// Append appends the checkpoint at forkStep with history hist and state s
// to b.
func (e *Encoder[S, P]) Append(b []byte, forkStep int, hist []Turn, s S) ([]byte, error) {
	b = append(b, e.head...)
	b = strconv.AppendInt(b, int64(forkStep), 10)
	b = append(b, `,"history":[`...)
	for i, t := range hist {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(append(b, `{"step":`...), int64(t.Step), 10)
		b = append(append(append(b, `,"action":"`...), t.Action.String()...), '"')
		b = strconv.AppendInt(append(b, `,"obs":`...), int64(t.Obs), 10)
		b = append(b, '}')
	}
	b = append(b, `],"state":`...)
	if a, ok := any(s).(JSONAppender); ok {
		b = a.AppendJSON(b)
	} else {
		sj, err := json.Marshal(s)
		if err != nil {
			return b, err
		}
		b = append(b, sj...)
	}
	return append(b, '}'), nil
}
