package kafkadial

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// Reach retries until the first exchange succeeds, stops at a permanent
// error, and gives up at the deadline with one message naming the brokers,
// the wait and the last real error (not the deadline's own).
func TestReach(t *testing.T) {
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	stop := errors.New("no such topic")
	for _, tc := range []struct {
		name     string
		attempts func(n int, ctx context.Context) error
		want     string // "" for success
		calls    int    // at least
	}{
		{"succeeds on the third attempt", func(n int, _ context.Context) error {
			if n < 3 {
				return refused
			}
			return nil
		}, "", 3},
		{"permanent error at once", func(int, context.Context) error { return Permanent(stop) }, "no such topic", 1},
		{"refused until the deadline", func(int, context.Context) error { return refused },
			"Kafka at 127.0.0.1:1,127.0.0.1:2 did not answer within 600ms (last: dial tcp 127.0.0.1:1: connect: connection refused): is it running, and is --brokers right? (forklab log serve --kafka-port 9092 runs one on this machine; --dial-timeout sets the wait)", 2},
		{"hangs until the deadline", func(n int, ctx context.Context) error {
			if n == 1 {
				return refused
			}
			<-ctx.Done()
			return ctx.Err()
		}, "within 600ms (last: dial tcp 127.0.0.1:1: connect: connection refused)", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			start := time.Now()
			err := Reach(context.Background(), []string{"127.0.0.1:1", "127.0.0.1:2"}, 600*time.Millisecond, func(ctx context.Context) error {
				n++
				return tc.attempts(n, ctx)
			})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("err %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err %v, want %q", err, tc.want)
			case n < tc.calls:
				t.Errorf("%d attempts, want at least %d", n, tc.calls)
			}
			if tc.want != "" && tc.calls > 1 && !errors.Is(err, ErrUnreachable) {
				t.Errorf("%v does not wrap ErrUnreachable", err)
			}
			// Bounded: never far past the timeout (generous for a busy machine).
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %s for a 600ms timeout", d)
			}
		})
	}
}
