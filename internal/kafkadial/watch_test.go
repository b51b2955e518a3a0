package kafkadial

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A probe that never reaches the cluster ends the watch once the limit has
// passed, not before, with one message naming the brokers, the wait, the
// last real error and the flag; the probe was called about once per
// interval meanwhile.
func TestWatchGivesUpAfterLimit(t *testing.T) {
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	w := NewWatch([]string{"127.0.0.1:1"}, 400*time.Millisecond)
	var calls atomic.Int64
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(context.Background(), 20*time.Millisecond, func(ctx context.Context) error {
			if calls.Add(1)%2 == 0 {
				<-ctx.Done() // a probe that hangs: its deadline is not the error to show
				return ctx.Err()
			}
			return refused
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not give up within 10s of a 400ms limit")
	}
	took := time.Since(start)
	if took < 400*time.Millisecond {
		t.Errorf("gave up after %s, before the 400ms limit", took)
	}
	select {
	case <-w.Gone():
	default:
		t.Error("Gone is not closed")
	}
	err := w.Err()
	if !errors.Is(err, ErrGone) || !strings.HasPrefix(err.Error(), "Kafka at 127.0.0.1:1 unreachable for ") ||
		!strings.Contains(err.Error(), "last: dial tcp 127.0.0.1:1: connect: connection refused): stopping (--retry-for sets how long to wait)") {
		t.Fatalf("err %v", err)
	}
	// 400ms at one probe per 20ms (the hanging ones take 5s each: at
	// least the first, refused, and one hanging).
	if n := calls.Load(); n < 2 {
		t.Errorf("%d probes, want at least 2", n)
	}
	// After the end, a success does not revive it.
	w.Up()
	if w.Err() == nil {
		t.Error("Up after the end cleared the error")
	}
}

// Outages shorter than the limit, each ended by a success, never end the
// watch, however many there are: only continuous unreachability counts.
func TestWatchRidesOutShortOutages(t *testing.T) {
	w := NewWatch([]string{"k:9092"}, 300*time.Millisecond)
	var calls atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	w.Run(ctx, 10*time.Millisecond, func(context.Context) error {
		// 100ms down, 20ms up, again and again: 1.5s in all.
		if calls.Add(1)%12 < 10 {
			return errors.New("i/o timeout")
		}
		return nil
	})
	if err := w.Err(); err != nil {
		t.Fatalf("short outages ended the watch: %v", err)
	}
	if n := calls.Load(); n < 24 {
		t.Errorf("%d probes in 1.5s at 10ms, want at least 24 (two outages and their ends)", n)
	}
	// Down counts the failures since the last Up.
	w.Up()
	w.Down(errors.New("a"))
	w.Down(context.DeadlineExceeded)
	since, last, downs := w.Outage()
	if since.IsZero() || downs != 2 || last == nil || last.Error() != "a" {
		t.Errorf("Outage() = %v, %v, %d; want a start, the last real error a, 2 downs", since, last, downs)
	}
}
