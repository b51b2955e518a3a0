package fork

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/forklab/forklab/internal/jsondup"
	"github.com/forklab/forklab/pipeline/world"
)

// CheckpointVersion is the version of the checkpoint JSON layout; decoding
// refuses any other. Version 2 (schema version 2) names the world's
// version, holds the parameters as the declaration's Params and the history
// as action names.
const CheckpointVersion = 2

// Checkpoint is a run stopped at a fork step, as plain data: everything a
// process needs to finish any branch of it. S is the world's state type.
// It round-trips through JSON byte for byte (Encode(Decode(Encode(c))) ==
// Encode(c)); see schemas/README.md for the layout.
type Checkpoint[S any] struct {
	Version      int          `json:"checkpoint_version"`
	World        string       `json:"world"`
	WorldVersion string       `json:"world_version"`
	Params       world.Params `json:"params"`
	Model        Model        `json:"model"`
	ForkStep     int          `json:"fork_step"`
	// History lists the turns taken before the fork, oldest first.
	History []Turn `json:"history"`
	// State is the world's state: the environment, the step counter and
	// the budget.
	State S `json:"state"`
}

// Encode returns c as one line of compact JSON, without a trailing newline.
func (c Checkpoint[S]) Encode() ([]byte, error) {
	if c.History == nil {
		c.History = []Turn{}
	}
	return json.Marshal(c)
}

// ErrCheckpoint marks a checkpoint that could not be decoded.
var ErrCheckpoint = errors.New("bad checkpoint")

// DecodeCheckpoint decodes one checkpoint from b, strictly: unknown fields,
// trailing data, a missing or different layout version, and a world or
// world version other than d's are errors wrapping ErrCheckpoint, with the
// position where the JSON broke off when it is truncated or malformed. The
// parameters are resolved against d (unknown or out-of-range ones are
// errors).
func DecodeCheckpoint[S any](b []byte, decl world.Declaration) (Checkpoint[S], error) {
	var c Checkpoint[S]
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&c); err != nil {
		return c, fmt.Errorf("%w: %s", ErrCheckpoint, describeJSONError(err, b))
	}
	if _, err := d.Token(); err != io.EOF {
		return c, fmt.Errorf("%w: trailing data after the checkpoint object", ErrCheckpoint)
	}
	if err := jsondup.Check(b); err != nil {
		return c, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	if c.Version != CheckpointVersion {
		return c, fmt.Errorf("%w: checkpoint_version %d, this forklab reads %d", ErrCheckpoint, c.Version, CheckpointVersion)
	}
	if c.World != decl.Name {
		return c, fmt.Errorf("%w: world %q, expected %q", ErrCheckpoint, c.World, decl.Name)
	}
	if c.WorldVersion != decl.Version {
		return c, fmt.Errorf("%w: world %s version %q, this forklab plays version %q: make the checkpoint again with this forklab", ErrCheckpoint, c.World, c.WorldVersion, decl.Version)
	}
	p, err := decl.Resolve(c.Params)
	if err != nil {
		return c, fmt.Errorf("%w: params: %v", ErrCheckpoint, err)
	}
	c.Params = p
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
	case errors.As(err, &syn) && syn.Offset >= int64(len(b)) && strings.Contains(syn.Error(), "unexpected end"):
		return fmt.Sprintf("JSON ends early after %d bytes (truncated file?)", len(b))
	case errors.As(err, &syn):
		return fmt.Sprintf("malformed JSON at byte %d: %v", syn.Offset, err)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %q has the wrong type at byte %d: want %v, got JSON %s", typ.Field, typ.Offset, typ.Type, typ.Value)
	}
	return err.Error()
}

// PeekWorld reads the world name and version of a checkpoint without
// decoding the rest, so a caller can pick the world to decode it with.
func PeekWorld(b []byte) (name, version string, err error) {
	var h struct {
		World        string `json:"world"`
		WorldVersion string `json:"world_version"`
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return "", "", fmt.Errorf("%w: %s", ErrCheckpoint, describeJSONError(err, b))
	}
	if h.World == "" {
		return "", "", fmt.Errorf("%w: no world named", ErrCheckpoint)
	}
	return h.World, h.WorldVersion, nil
}

// Verify checks that c is what lab produces for its seed: the run replayed
// from the task seed to c.ForkStep (with the prefix's noise stream) has c's
// state and history. A checkpoint that fails was edited, or written by
// another version of the world; the error wraps ErrCheckpoint. States are
// compared by their JSON.
func Verify[S any](lab Lab[S], c Checkpoint[S]) error {
	sd := lab.World.Seed(&c.State)
	want := lab.Checkpoint(sd, c.ForkStep, c.Params)
	a, err1 := json.Marshal(want.State)
	b, err2 := json.Marshal(c.State)
	if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
		return fmt.Errorf("%w: its state is not the one seed %d reaches at fork step %d (edited, or from another forklab)", ErrCheckpoint, sd, c.ForkStep)
	}
	if len(want.History) != len(c.History) {
		return fmt.Errorf("%w: its history has %d turns, seed %d takes %d to fork step %d", ErrCheckpoint, len(c.History), sd, len(want.History), c.ForkStep)
	}
	for i := range want.History {
		if want.History[i] != c.History[i] {
			return fmt.Errorf("%w: turn %d of its history differs from seed %d's run", ErrCheckpoint, i+1, sd)
		}
	}
	return nil
}
