package lab

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// A recorded population (forklab sweep --runs) is a list of runs someone
// already has — checkpoints in a file, sessions on the session log, the
// threads of an agent's checkpointer — instead of seeds a generator
// draws. Its runs are read by position (package recorded), each as a
// Record, and forked by the world: a built-in world decodes and verifies
// the checkpoint and computes its features from its state; an external
// agent is asked through its protocol (load, inspect). The result is the
// same SeedResult a seed's run gives, keyed by the run's id, so the sweep,
// its tables and everything downstream do not know which it was.

// Record is one recorded run, as its source read it.
type Record struct {
	// Pos is the run's position in its population, from 0: the sweep's
	// units are ranges of positions.
	Pos uint64
	// RunID identifies the run, unique in its population: the record's
	// run_id, a session's stream name, an agent's run id.
	RunID string
	// Where names the run in messages: "runs.jsonl line 12 (run r7)",
	// "stream prod/s5".
	Where string
	// Seed is the run's task seed when its source names one (a record's
	// seed key, a session's session_start); a built-in world's checkpoint
	// carries its own, which must agree.
	Seed *uint64
	// Task holds the task's draws as a JSON object, when the record gives
	// them; nil otherwise.
	Task json.RawMessage
	// Metadata is what the source says about the run beyond the above, as
	// JSON (a file record's other keys as an object, an agent's metadata
	// as it gave it); nil for none. The tasks table carries it.
	Metadata json.RawMessage
	// Forks are the run's checkpoints, one per fork step. Empty: the
	// world loads the run itself (an agent that declares the runs
	// capability answers load with them).
	Forks []RecordFork
}

// RecordFork is one recorded checkpoint of a run.
type RecordFork struct {
	// ForkStep is the step the run was checkpointed at; 0 when the record
	// does not say (a built-in world's checkpoint says it itself).
	ForkStep int
	// Checkpoint is the checkpoint's JSON, as the world's checkpoint
	// (forklab checkpoint) or an agent's start returned it.
	Checkpoint json.RawMessage
	// Features and Hidden are JSON objects of the declared features and
	// hidden truth, when the record gives them (nil when not): a world
	// that computes its own compares them, and a record that disagrees is
	// an error row, never silently overridden.
	Features, Hidden json.RawMessage
	// Over and Cost, when the record gives them: the run had ended at
	// the checkpoint; what reaching it cost (a JSON object of cost
	// fields).
	Over *bool
	Cost json.RawMessage
	// Err, when set, says why the source has no checkpoint here although
	// the run should have one (a session still running, short of the
	// fork step): the fork is an error row.
	Err string
}

// Clone returns a copy of r that shares nothing with it: a source reuses
// its Record, and a runner that keeps records past the next read clones
// them.
func (r *Record) Clone() *Record {
	c := *r
	if r.Seed != nil {
		s := *r.Seed
		c.Seed = &s
	}
	c.Task, c.Metadata = bytes.Clone(r.Task), bytes.Clone(r.Metadata)
	c.Forks = make([]RecordFork, len(r.Forks))
	for i, f := range r.Forks {
		f.Checkpoint, f.Features, f.Hidden, f.Cost = bytes.Clone(f.Checkpoint), bytes.Clone(f.Features), bytes.Clone(f.Hidden), bytes.Clone(f.Cost)
		if f.Over != nil {
			o := *f.Over
			f.Over = &o
		}
		c.Forks[i] = f
	}
	return &c
}

// ErrRecord marks a recorded run the sweep cannot use at all: its
// checkpoint does not decode, is of another world or version, or differs
// from the run its seed replays; a duplicate run id; a stream that is not
// a session. It is bad input: the sweep stops before anything is
// published, naming the record, and forklab exits 2.
var ErrRecord = errors.New("bad recorded run")

// RecordError is an ErrRecord naming the run: Where says which (a file's
// line, a stream), Err why.
type RecordError struct {
	Where string
	Err   error
}

func (e *RecordError) Error() string { return e.Where + ": " + e.Err.Error() }

// Unwrap returns Err.
func (e *RecordError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrRecord) hold.
func (e *RecordError) Is(target error) bool { return target == ErrRecord }

// BadRecord returns a RecordError for the record at where.
func BadRecord(where string, format string, args ...any) error {
	return &RecordError{Where: where, Err: fmt.Errorf(format, args...)}
}

// Records reads a unit's recorded runs in order: next returns each in
// turn, then (nil, nil) after the last. A Record and its slices are only
// valid until the next call.
type Records func(ctx context.Context) (*Record, error)

// RecordRunner forks recorded runs under one plan: it is the Runner of a
// recorded population.
type RecordRunner interface {
	// RunRecords forks every record next yields, in order, and calls
	// emit once per record with its results (Seed the run's seed or its
	// RunKey, RunID set; a fork step the record has no checkpoint at is
	// Absent). As for Runner.Run, failures of single runs, forks or
	// branches are error rows; a record that cannot be used at all is a
	// *RecordError returned.
	RunRecords(ctx context.Context, next Records, emit func(*SeedResult) error) error
}

// Recorder is an Instance that forks recorded runs.
type Recorder interface {
	// Recorded returns the record runner of plan.
	Recorded(plan Plan) (RecordRunner, error)
}

// RunKey is the seed of a recorded run that has none: the first 63 bits
// of the SHA-256 of its run id, big-endian (so it is a valid seed, in [0,
// 2^63-2]). It keys the run's branch noise (fork.Key) as a seed would, and
// is the seed an agent's branch request carries for the run; the run's
// seed column stays NULL. It lies in [0, 2^63-2], the seeds forklab plays.
func RunKey(runID string) uint64 {
	h := sha256.Sum256([]byte(runID))
	return (binary.BigEndian.Uint64(h[:8]) >> 1) % (1<<63 - 1)
}
