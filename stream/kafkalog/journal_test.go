package kafkalog

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/forklab/forklab/stream/broker"
)

// recordingJournal is the embedded broker's journal, with its calls
// written down.
type recordingJournal struct {
	j     *broker.Journal
	mu    sync.Mutex
	calls []string
}

func (r *recordingJournal) Write(part int32, base int64, recs []JournalRecord) func() error {
	r.mu.Lock()
	r.calls = append(r.calls, fmt.Sprintf("write %d+%d", base, len(recs)))
	r.mu.Unlock()
	brecs := make([]broker.Record, len(recs))
	for i, rec := range recs {
		brecs[i] = broker.Record(rec)
	}
	return r.j.Write(part, base, brecs)
}

func (r *recordingJournal) Checkpoint(part int32) error {
	r.mu.Lock()
	r.calls = append(r.calls, "checkpoint")
	r.mu.Unlock()
	return r.j.Checkpoint(part)
}

// TestJournalAfterFailedWrite: each batch goes to the journal at the
// offset it must land at; a produce that lands but is answered with an
// error is not acknowledged, and before the next batch is written the
// log re-reads Kafka and checkpoints the partition (its records, the
// failed batch's included, synced in the broker's own files), so that the
// journal's next frame does not skip records the broker holds unsynced.
// The retry is a duplicate and the stream holds each append once, also
// after a restart.
func TestJournalAfterFailedWrite(t *testing.T) {
	dir := t.TempDir()
	b, err := broker.Start(broker.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rj := &recordingJournal{j: b.Journal(DefaultTopic)}
	l, err := Open(ctx, Config{Brokers: b.Addrs(), Journal: rj})
	if err != nil {
		t.Fatal(err)
	}
	tp := "text/plain"
	if _, err := l.Create(ctx, CreateRequest{Name: "s", ContentType: tp, TTL: -1}); err != nil {
		t.Fatal(err)
	}
	app := func(seq int64, body string) error {
		_, err := l.Append(ctx, AppendRequest{Name: "s", ContentType: tp, Body: []byte(body), HasProducer: true, ProducerID: "p", Seq: seq})
		return err
	}
	if err := app(0, "a"); err != nil {
		t.Fatal(err)
	}
	fault := b.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.RequestTimedOut, Count: -1})
	err = app(1, "b")
	fault.Remove()
	if KindOf(err) != Unavailable {
		t.Fatalf("append while the produce is answered REQUEST_TIMED_OUT: %v, want Unavailable", err)
	}
	// The retry, once the resync is done: the write landed, a duplicate.
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := l.Append(ctx, AppendRequest{Name: "s", ContentType: tp, Body: []byte("b"), HasProducer: true, ProducerID: "p", Seq: 1})
		if err == nil {
			if res.Outcome != Duplicate {
				t.Fatalf("retry of seq 1: outcome %v, want Duplicate", res.Outcome)
			}
			break
		}
		if KindOf(err) != Unavailable || time.Now().After(deadline) {
			t.Fatalf("retry of seq 1: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := app(2, "c"); err != nil {
		t.Fatal(err)
	}
	rj.mu.Lock()
	calls := slices.Clone(rj.calls)
	rj.mu.Unlock()
	want := []string{"write 0+1", "write 1+1", "write 2+1", "checkpoint", "write 3+1"}
	if !slices.Equal(calls, want) {
		t.Fatalf("journal calls %q, want %q", calls, want)
	}
	l.Close()
	b.Close()

	b, err = broker.Start(broker.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	l, err = Open(ctx, Config{Brokers: b.Addrs(), Journal: &recordingJournal{j: b.Journal(DefaultTopic)}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r, err := l.Read(ctx, ReadRequest{Name: "s", From: Start})
	if err != nil || string(r.Data) != "abc" {
		t.Fatalf("after a restart: %q %v, want \"abc\"", r.Data, err)
	}
}
