package kafkalog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// partReader reads a partition of the data topic in order, through a
// connection to the partition's leader: kafka-go's Conn decodes a fetch
// response as it reads it, several times faster than Client.Fetch on the
// large reads of a rebuild (docs/session-log.md, "Restarts").
type partReader struct {
	l    *Log
	part int32
	conn *kafka.Conn
}

func (l *Log) newPartReader(part int32) *partReader { return &partReader{l: l, part: part} }

// read calls fn for the records of the partition from offset from, at
// most maxBytes of them (at least one batch), and returns the offset after
// the last one. A from below the log start offset is errRetention.
func (r *partReader) read(ctx context.Context, from int64, maxBytes int, fn func(f fetched)) (int64, error) {
	if r.conn == nil {
		var err error
		d := kafka.Dialer{Timeout: 10 * time.Second, SASLMechanism: r.l.cfg.SASL}
		for _, b := range r.l.cfg.Brokers {
			if r.conn, err = d.DialLeader(ctx, "tcp", b, r.l.cfg.Topic, int(r.part)); err == nil {
				break
			}
		}
		if err != nil {
			return from, fmt.Errorf("connect to the leader of %s/%d: %w", r.l.cfg.Topic, r.part, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	r.conn.SetDeadline(deadline)
	if _, err := r.conn.Seek(from, kafka.SeekAbsolute); err != nil {
		r.close()
		return from, err
	}
	batch := r.conn.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: maxBytes, MaxWait: 10 * time.Millisecond})
	next := from
	for {
		m, err := batch.ReadMessage()
		if err != nil {
			break
		}
		if m.Offset < from {
			continue
		}
		fn(fetched{koff: m.Offset, key: m.Key, value: m.Value, headers: m.Headers, time: m.Time})
		next = m.Offset + 1
	}
	err := batch.Close()
	switch {
	case errors.Is(err, kafka.OffsetOutOfRange):
		return from, errRetention
	case err != nil:
		r.close() // the next read dials again (a new leader, a broken connection)
		return next, err
	}
	return next, nil
}

func (r *partReader) close() {
	if r.conn != nil {
		r.conn.Close()
		r.conn = nil
	}
}
