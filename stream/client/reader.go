package client

import (
	"context"
	"io"
)

// Mode is how a Reader waits at the tail.
type Mode int

const (
	// CatchUp reads to the tail and then reports io.EOF.
	CatchUp Mode = iota
	// LongPoll waits at the tail for new data (live=long-poll, §5.7) and
	// reports io.EOF only when the stream is closed.
	LongPoll
)

// Reader reads a stream from an offset, chunk by chunk, and always knows
// where to resume: after a crash, a new Reader from Offset() gets exactly
// the missing tail.
type Reader struct {
	// MaxBytes, if set, bounds each read's data (the log's max_bytes
	// extension; at least one record is returned): 1 reads one record at
	// a time, so Offset after each chunk is the offset after that record.
	MaxBytes int

	c      *Client
	stream string
	mode   Mode
	next   string
	cursor string
	done   bool
}

// NewReader returns a reader of stream from offset (Start for the
// beginning, or an offset the server returned earlier).
func (c *Client) NewReader(stream, offset string, mode Mode) *Reader {
	if offset == "" {
		offset = Start
	}
	return &Reader{c: c, stream: stream, mode: mode, next: offset}
}

// Offset is the offset to resume from: everything before it has been
// returned by Next.
func (r *Reader) Offset() string { return r.next }

// Next returns the next chunk with data. In CatchUp mode it returns io.EOF
// once the tail is reached; in LongPoll mode it waits for data and returns
// io.EOF once the stream is closed and fully read.
func (r *Reader) Next(ctx context.Context) (Chunk, error) {
	for {
		if r.done {
			return Chunk{}, io.EOF
		}
		var ch Chunk
		var err error
		if r.mode == LongPoll {
			ch, err = r.c.readLive(ctx, r.stream, r.next, &r.cursor, r.MaxBytes)
		} else {
			ch, err = r.c.read(ctx, r.stream, r.next, "", "", r.MaxBytes)
		}
		if err != nil {
			return Chunk{}, err
		}
		r.next = ch.Next
		if ch.Closed || (r.mode == CatchUp && ch.UpToDate) {
			r.done = true
		}
		if len(ch.Data) > 0 && !(isJSONType(ch.ContentType) && string(ch.Data) == "[]") {
			return ch, nil
		}
	}
}

func (c *Client) readLive(ctx context.Context, name, offset string, cursor *string, maxBytes int) (Chunk, error) {
	ch, err := c.read(ctx, name, offset, "long-poll", *cursor, maxBytes)
	if err != nil {
		return ch, err
	}
	if ch.Cursor != "" {
		*cursor = ch.Cursor
	}
	return ch, nil
}
