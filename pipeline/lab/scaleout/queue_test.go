package scaleout

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/forklab/forklab/internal/kafkadial"
	"github.com/forklab/forklab/stream/broker/brokertest"
	"github.com/segmentio/kafka-go"
)

// produce, the write every report and unit record goes through: across a
// network cut it retries with backoff, counting the retries, and succeeds
// once the network is back; with the cluster out of reach for longer than
// RetryFor it gives up with the watch's error, soon after the limit.
func TestProduceRetriesUntilRetryFor(t *testing.T) {
	b := brokertest.StartCut(t, "")
	p := b.Proxy
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	q := Queue{Brokers: []string{p.Addr()}, Name: "produce", Partitions: 1, RetryFor: 3 * time.Second}
	conn, err := dial(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.close()
	rec := func() kafka.Message { return Report{Kind: KindProgress, Sweep: "s"}.record(q.ResultsTopic()) }
	if err := conn.produce(ctx, rec()); err != nil || conn.retries.Load() != 0 {
		t.Fatalf("first write: %v, %d retries", err, conn.retries.Load())
	}
	// Cut for 1.5s: retried (by the writer, or here), then written.
	p.Cut()
	go func() { time.Sleep(1500 * time.Millisecond); p.Restore() }()
	start := time.Now()
	if err := conn.produce(ctx, rec()); err != nil {
		t.Fatalf("write across a 1.5s cut (RetryFor 3s): %v", err)
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("the write across the cut took %s: the cut missed it", took)
	}
	// Cut for good: the watch gives up after RetryFor.
	p.Cut()
	start = time.Now()
	err = conn.produce(ctx, rec())
	took := time.Since(start)
	if !errors.Is(err, kafkadial.ErrGone) || !strings.Contains(err.Error(), "unreachable for") {
		t.Fatalf("write to a cluster cut for good: %v", err)
	}
	if took > 15*time.Second || took < 2*time.Second {
		t.Errorf("gave up after %s, RetryFor 3s", took)
	}
}
