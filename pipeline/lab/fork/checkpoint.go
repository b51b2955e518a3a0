package fork

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// CheckpointVersion is the version of the checkpoint JSON layout; decoding
// refuses any other.
const CheckpointVersion = 1

// Checkpoint is a run stopped at a fork step, as plain data: everything a
// process needs to finish any branch of it. S is the world's state type and
// P its parameter type. It round-trips through JSON byte for byte
// (Encode(Decode(Encode(c))) == Encode(c)); see schemas/README.md for the
// layout.
type Checkpoint[S, P any] struct {
	Version  int    `json:"checkpoint_version"`
	World    string `json:"world"`
	Params   P      `json:"params"`
	Model    Model  `json:"model"`
	ForkStep int    `json:"fork_step"`
	// History lists the turns taken before the fork, oldest first.
	History []Turn `json:"history"`
	// State is the world's state: the environment, the step counter and
	// the budget.
	State S `json:"state"`
}

// Encode returns c as one line of compact JSON, without a trailing newline.
func (c Checkpoint[S, P]) Encode() ([]byte, error) {
	if c.History == nil {
		c.History = []Turn{}
	}
	return json.Marshal(c)
}

// ErrCheckpoint marks a checkpoint that could not be decoded.
var ErrCheckpoint = errors.New("bad checkpoint")

// DecodeCheckpoint decodes one checkpoint from b, strictly: unknown fields,
// trailing data, a missing or different version and a world other than
// world are errors wrapping ErrCheckpoint, with the position where the JSON
// broke off when it is truncated or malformed.
func DecodeCheckpoint[S, P any](b []byte, world string) (Checkpoint[S, P], error) {
	var c Checkpoint[S, P]
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&c); err != nil {
		return c, fmt.Errorf("%w: %s", ErrCheckpoint, describeJSONError(err, b))
	}
	if _, err := d.Token(); err != io.EOF {
		return c, fmt.Errorf("%w: trailing data after the checkpoint object", ErrCheckpoint)
	}
	if c.Version != CheckpointVersion {
		return c, fmt.Errorf("%w: checkpoint_version %d, this forklab reads %d", ErrCheckpoint, c.Version, CheckpointVersion)
	}
	if c.World != world {
		return c, fmt.Errorf("%w: world %q, expected %q", ErrCheckpoint, c.World, world)
	}
	if err := c.Model.Validate(); err != nil {
		return c, fmt.Errorf("%w: model: %v", ErrCheckpoint, err)
	}
	if c.ForkStep < 1 {
		return c, fmt.Errorf("%w: fork_step %d is below 1", ErrCheckpoint, c.ForkStep)
	}
	return c, nil
}

func describeJSONError(err error, b []byte) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return "empty input, expected a JSON object"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Sprintf("JSON ends early after %d bytes (truncated file?)", len(b))
	case errors.As(err, &syn):
		return fmt.Sprintf("malformed JSON at byte %d: %v", syn.Offset, err)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %q has the wrong type at byte %d: want %v, got JSON %s", typ.Field, typ.Offset, typ.Type, typ.Value)
	}
	return err.Error()
}

// Verify checks that c is what lab produces for its seed: the run replayed
// from the task seed to c.ForkStep (with the prefix's noise stream) has c's
// state and history. A checkpoint that fails was edited, or written by
// another version of the world; the error wraps ErrCheckpoint. seed reads
// the task seed from a state.
func Verify[S comparable, P any](lab Lab[S], c Checkpoint[S, P], seed func(S) uint64) error {
	sd := seed(c.State)
	var hist []Turn
	want := lab.Advance(lab.World.Start(sd), PrefixKey(sd), c.ForkStep, &hist)
	if want != c.State {
		return fmt.Errorf("%w: its state is not the one seed %d reaches at fork step %d (edited, or from another forklab)", ErrCheckpoint, sd, c.ForkStep)
	}
	if len(hist) != len(c.History) {
		return fmt.Errorf("%w: its history has %d turns, seed %d takes %d to fork step %d", ErrCheckpoint, len(c.History), sd, len(hist), c.ForkStep)
	}
	for i := range hist {
		if hist[i] != c.History[i] {
			return fmt.Errorf("%w: turn %d of its history differs from seed %d's run", ErrCheckpoint, i+1, sd)
		}
	}
	return nil
}
