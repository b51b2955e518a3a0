// Package kafkadial bounds a command's first contact with a Kafka cluster:
// every command that dials Kafka (forklab log serve --brokers, log sink,
// worker, sweep --distributed) retries its first exchange — connecting,
// looking up or creating its topics — for at most its --dial-timeout, then
// fails with one message naming the brokers, the wait and the last error.
// Without it, an address where nothing answers (a firewall dropping
// packets, a port that accepts and never replies) costs each client
// library's own timeouts, tens of seconds, with a message in the library's
// words.
package kafkadial

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// DefaultTimeout is --dial-timeout's default: long enough for a cluster
// that is starting, short enough to notice a wrong address.
const DefaultTimeout = 10 * time.Second

// MinTimeout and MaxTimeout bound --dial-timeout.
const (
	MinTimeout = 100 * time.Millisecond
	MaxTimeout = 10 * time.Minute
)

// ErrUnreachable marks a cluster that did not answer within the timeout.
var ErrUnreachable = errors.New("did not answer")

// permanent marks an error that retrying will not mend.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// Permanent wraps err so that Reach returns it at once, without retrying
// (a topic that does not exist, when waiting for it is not asked).
func Permanent(err error) error { return permanent{err} }

// retryEvery is the pause between attempts.
const retryEvery = 250 * time.Millisecond

// Reach runs first until it succeeds, returns a Permanent error, or
// timeout has passed since the call; each attempt's context ends at that
// deadline. After the deadline the error wraps ErrUnreachable:
//
//	Kafka at 127.0.0.1:9092 did not answer within 10s (last: dial tcp …: connection refused): is it running, and is --brokers right? (forklab log serve --kafka-port 9092 runs one on this machine; --dial-timeout sets the wait)
//
// A ctx that ends first returns ctx.Err().
func Reach(ctx context.Context, brokers []string, timeout time.Duration, first func(context.Context) error) error {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	deadline := time.Now().Add(timeout)
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var last error
	for {
		err := first(dctx)
		if err == nil {
			return nil
		}
		var p permanent
		if errors.As(err, &p) {
			return p.error
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !errors.Is(err, context.DeadlineExceeded) || last == nil {
			last = err
		}
		if time.Until(deadline) <= 0 {
			return Unreachable(brokers, timeout, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(retryEvery, time.Until(deadline))):
		}
	}
}

// Unreachable is the error Reach returns after the deadline, for callers
// that run their own loop.
func Unreachable(brokers []string, timeout time.Duration, last error) error {
	return fmt.Errorf("Kafka at %s %w within %s (last: %v): is it running, and is --brokers right? (forklab log serve --kafka-port 9092 runs one on this machine; --dial-timeout sets the wait)",
		strings.Join(brokers, ","), ErrUnreachable, timeout, last)
}
