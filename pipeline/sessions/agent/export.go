package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/forklab/forklab/internal/atomicfile"
	"github.com/forklab/forklab/pipeline/sessions/session"
	"github.com/forklab/forklab/schemas"
	"github.com/forklab/forklab/stream/client"
	"github.com/forklab/forklab/stream/kafkalog"
	"github.com/parquet-go/parquet-go"
)

// ErrNotJSON is wrapped by EventRows's error for a stream that is not a
// JSON stream: its records are not session events, and no rows are
// returned (forklab log sink skips such streams the same way).
var ErrNotJSON = errors.New("not a JSON stream: its records are not session events")

// ErrTrimmed is wrapped by EventRows's error for a stream whose first
// events retention removed: the rows are what the log still holds.
var ErrTrimmed = errors.New("its first events were removed by retention")

// EventRows reads stream from the beginning and returns its events as rows
// of the events table (EventFold.Row). Events the fold refuses are still
// exported (with their raw JSON); the returned error then says which, so a
// corrupt stream can be inspected with SQL.
//
// When retention removed the stream's first records (the log answers the
// read from the beginning with 410 Gone, reason retention), the rows start
// at the earliest offset the log names (Forklab-Earliest-Offset), which is
// their read_offset, indexed from 0 there, and the returned error wraps
// ErrTrimmed saying so; the session fold is not checked (its start is
// gone).
func EventRows(ctx context.Context, c *client.Client, stream string) ([]schemas.SessionEvent, error) {
	var rows []schemas.SessionEvent
	var ef EventFold
	var s session.Session
	var foldErr, trimmed error
	offset := client.Start
	for {
		ch, err := c.Read(ctx, stream, offset)
		if e := client.EarliestOffset(err); offset == client.Start && e != "" && client.GoneReason(err) == client.GoneRetention {
			trimmed = fmt.Errorf("%s: %w (410 Gone from the beginning): exported from the earliest offset the log holds, %s, indexed from 0 there", stream, ErrTrimmed, e)
			offset = e
			ch, err = c.Read(ctx, stream, offset)
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", stream, err)
		}
		if !kafkalog.SameContentType(ch.ContentType, "application/json") {
			return nil, fmt.Errorf("stream %s is %s, %w; read it with forklab log read", stream, ch.ContentType, ErrNotJSON)
		}
		msgs, err := ch.Messages()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", stream, err)
		}
		for _, m := range msgs {
			rows = append(rows, ef.Row(stream, int32(len(rows)), offset, m))
			if foldErr == nil && trimmed == nil {
				e, _ := session.Decode(m)
				if err := s.Apply(e); err != nil {
					foldErr = fmt.Errorf("%s: event %d: %w", stream, len(rows)-1, err)
				}
			}
		}
		offset = ch.Next
		if ch.UpToDate {
			break
		}
	}
	if trimmed != nil {
		return rows, trimmed
	}
	return rows, foldErr
}

// EventFold is what a stream's events so far say about its session, for
// the rows of the events table: the seed of its session_start event and the
// fork step, arm and replica of its fork event (the first of each; the
// session fold refuses a second). The zero value is a stream before its
// first event. It is plain data, so that forklab log sink can commit it
// with its progress and carry it over a restart.
type EventFold struct {
	Seed     *int64  `json:"seed,omitempty"`
	ForkStep *int32  `json:"fork_step,omitempty"`
	Arm      *string `json:"arm,omitempty"`
	Replica  *int32  `json:"replica,omitempty"`
}

// Row flattens message msg of stream, its index-th event (from 0), into a
// row of the events table, with readOffset as its read_offset, and folds
// it into f first: a session_start row carries its own seed, a fork row
// its own branch. A message that is not a session event is a row with its
// JSON and an empty type. It is the one definition of the events table's
// rows, for forklab log export and forklab log sink alike.
func (f *EventFold) Row(stream string, index int32, readOffset string, msg []byte) schemas.SessionEvent {
	row := schemas.SessionEvent{Stream: stream, Index: index, ReadOffset: readOffset, Event: string(msg)}
	e, err := session.Decode(msg)
	row.Type = e.Type
	if err == nil {
		fill(&row, e)
		switch {
		case e.Type == session.TypeStart && f.Seed == nil && e.Seed != nil:
			seed := int64(*e.Seed)
			f.Seed = &seed
		case e.Type == session.TypeFork && f.ForkStep == nil && e.Replica != nil:
			step, arm, replica := int32(e.ForkStep), string(e.Arm), int32(*e.Replica)
			f.ForkStep, f.Arm, f.Replica = &step, &arm, &replica
		}
	}
	row.SessionSeed, row.BranchForkStep, row.BranchArm, row.BranchReplica = f.Seed, f.ForkStep, f.Arm, f.Replica
	return row
}

// fill sets the columns of row r that event e holds itself (everything but
// the stream, index, offset, type, JSON and the fold's seed and branch).
func fill(r *schemas.SessionEvent, e session.Event) {
	r.Domain = e.Type != session.TypeIncarnation
	r.Epoch = e.Epoch
	if e.Turn > 0 {
		t := int32(e.Turn)
		r.Turn = &t
	}
	if e.Tool != "" {
		r.Tool = &e.Tool
	}
	if e.Type == session.TypeModelTurn {
		nt := e.NoTool
		r.NoTool = &nt
	}
	switch {
	case e.Action != "":
		r.Action = &e.Action
	case e.Recovery != "":
		r.Action = &e.Recovery
	}
	if len(e.Obs) > 0 {
		obs := string(e.Obs)
		if c, err := session.Canonical(e.Obs); err == nil {
			obs = string(c)
		}
		r.Obs = &obs
	}
	if e.Steps != nil {
		st := int32(*e.Steps)
		r.Steps = &st
	}
	r.Success = e.Success
}

// EventsRowGroup is the rows per row group of an events file. It bounds
// what writing a file costs in memory: parquet-go buffers a row group
// whole, and past its 256 KiB page buffers the cost jumps — writing 10,000
// session events took 28 MiB in one row group, 22 MiB in groups of 3,072
// and 5 MiB in groups of 2,048 (the file 3% larger than in one group).
const EventsRowGroup = 2048

// WriteEvents writes rows to path as one zstd Parquet file, atomically.
func WriteEvents(path string, rows []schemas.SessionEvent) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := atomicfile.Create(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if err := EncodeEvents(f, rows); err != nil {
		return err
	}
	return f.Commit()
}

// EncodeEvents writes rows to w as one zstd Parquet file of the events
// table, in row groups of EventsRowGroup rows. The bytes are a function of
// the rows alone, so the same rows make the same file (forklab log sink
// relies on it).
func EncodeEvents(w io.Writer, rows []schemas.SessionEvent) error {
	pw := parquet.NewGenericWriter[schemas.SessionEvent](w, parquet.Compression(&parquet.Zstd), parquet.MaxRowsPerRowGroup(EventsRowGroup))
	if _, err := pw.Write(rows); err != nil {
		return err
	}
	return pw.Close()
}
