package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/forklab/forklab/internal/atomicfile"
	"github.com/forklab/forklab/pipeline/sessions/session"
	"github.com/forklab/forklab/schemas"
	"github.com/forklab/forklab/stream/client"
	"github.com/parquet-go/parquet-go"
)

// EventRows reads stream from the beginning and returns its events as rows
// of the events table (schemas.SessionEvent), with the fold's seed and
// branch on every row, for a session of any world. Events
// the fold refuses are still exported (with their raw JSON); the returned
// error then says which, so a corrupt stream can be inspected with SQL.
func EventRows(ctx context.Context, c *client.Client, stream string) ([]schemas.SessionEvent, error) {
	var rows []schemas.SessionEvent
	var events []session.Event
	offset := client.Start
	for {
		ch, err := c.Read(ctx, stream, offset)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", stream, err)
		}
		msgs, err := ch.Messages()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", stream, err)
		}
		for _, m := range msgs {
			e, derr := session.Decode(m)
			row := schemas.SessionEvent{Stream: stream, Index: int32(len(rows)), ReadOffset: offset, Event: string(m), Type: e.Type}
			if derr == nil {
				fill(&row, e)
			}
			rows = append(rows, row)
			events = append(events, e)
		}
		offset = ch.Next
		if ch.UpToDate {
			break
		}
	}
	var s session.Session
	var foldErr error
	for i, e := range events {
		if err := s.Apply(e); err != nil {
			foldErr = fmt.Errorf("%s: event %d: %w", stream, i, err)
			break
		}
	}
	for i := range rows {
		if s.Started {
			seed := int64(s.Seed)
			rows[i].SessionSeed = &seed
		}
		if b := s.Branch; b != nil {
			f, r, a := int32(b.ForkStep), int32(b.Replica), string(b.Arm)
			rows[i].BranchForkStep, rows[i].BranchReplica, rows[i].BranchArm = &f, &r, &a
		}
	}
	return rows, foldErr
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
	w := parquet.NewGenericWriter[schemas.SessionEvent](f, parquet.Compression(&parquet.Zstd))
	if _, err := w.Write(rows); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return f.Commit()
}
