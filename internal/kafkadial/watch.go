package kafkadial

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// DefaultRetryFor is --retry-for's default: how long a long-running
// command (forklab worker, the coordinator of sweep --distributed, log
// sink --follow) rides out a Kafka cluster it cannot reach before it
// stops. A broker restart, a rebalance or a network blip take seconds;
// five minutes covers a rolling restart of a cluster.
const DefaultRetryFor = 5 * time.Minute

// MinRetryFor and MaxRetryFor bound --retry-for.
const (
	MinRetryFor = time.Second
	MaxRetryFor = 7 * 24 * time.Hour
)

// ErrGone marks a cluster that stayed unreachable longer than a Watch's
// limit.
var ErrGone = errors.New("unreachable")

// Watch tracks whether a long-running process can reach its Kafka cluster:
// every exchange that succeeds (Up) or fails to reach the cluster (Down)
// is reported to it, and a probe (Run) reports one every interval even
// when the process is idle. Once the cluster has been unreachable, without
// a single success, for longer than the limit, Err returns the error that
// ends the process and Gone is closed:
//
//	Kafka at 127.0.0.1:9092 unreachable for 5m0s (since 12:04:05; last: dial tcp …: connection refused): stopping (--retry-for sets how long to wait)
//
// Errors from a cluster that answers (a rebalance in progress, a leader
// moving) are not outages: report them as Up, or not at all.
type Watch struct {
	brokers []string
	limit   time.Duration

	mu    sync.Mutex
	since time.Time // zero while reachable
	last  error
	downs int // Down calls since the last Up
	gone  chan struct{}
	err   error
}

// NewWatch watches brokers with limit (DefaultRetryFor when ≤ 0).
func NewWatch(brokers []string, limit time.Duration) *Watch {
	if limit <= 0 {
		limit = DefaultRetryFor
	}
	return &Watch{brokers: brokers, limit: limit, gone: make(chan struct{})}
}

// Limit is how long the cluster may stay unreachable.
func (w *Watch) Limit() time.Duration { return w.limit }

// Up reports an exchange with the cluster that succeeded.
func (w *Watch) Up() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.since, w.last, w.downs = time.Time{}, nil, 0
	}
}

// Down reports an exchange that could not reach the cluster (err), and
// returns Err.
func (w *Watch) Down(err error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.downLocked(err, time.Now())
}

func (w *Watch) downLocked(err error, now time.Time) error {
	if w.err != nil {
		return w.err
	}
	if w.since.IsZero() {
		w.since = now
	}
	if err != nil && (w.last == nil || !errors.Is(err, context.DeadlineExceeded)) {
		w.last = err // the last real error, not a deadline's own
	}
	w.downs++
	if d := now.Sub(w.since); d >= w.limit {
		w.err = fmt.Errorf("Kafka at %s %w for %s (since %s; last: %v): stopping (--retry-for sets how long to wait)",
			strings.Join(w.brokers, ","), ErrGone, d.Round(time.Second), w.since.Format("15:04:05"), w.last)
		close(w.gone)
	}
	return w.err
}

// Err is nil until the cluster has been unreachable for longer than the
// limit; then it is the error that ends the process (wrapping ErrGone).
func (w *Watch) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Gone is closed when Err becomes non-nil.
func (w *Watch) Gone() <-chan struct{} { return w.gone }

// Outage says since when the cluster has been unreachable (zero while it
// is reachable), the last error, and how many exchanges failed since the
// last success.
func (w *Watch) Outage() (since time.Time, last error, downs int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.since, w.last, w.downs
}

// Run calls probe every interval (each call bounded by the interval, or by
// 5s or a quarter of the limit, whichever is less, when that is longer) and reports its result, until ctx ends or the
// cluster is gone. probe is a cheap request that any broker answers (a
// metadata request).
func (w *Watch) Run(ctx context.Context, every time.Duration, probe func(context.Context) error) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, max(every, min(5*time.Second, w.limit/4)))
		err := probe(pctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			w.Up()
		default:
			if w.Down(err) != nil {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-w.gone:
			return
		case <-t.C:
		}
	}
}

// Probe returns a Watch probe that connects to each of brokers in turn
// (a new connection, so that a cached answer cannot hide an outage) and
// asks it for the cluster's brokers: nil as soon as one answers.
func Probe(brokers []string) func(context.Context) error {
	return func(ctx context.Context) error {
		err := errors.New("no brokers")
		for _, b := range brokers {
			var c *kafka.Conn
			if c, err = (&kafka.Dialer{}).DialContext(ctx, "tcp", b); err != nil {
				continue
			}
			if d, ok := ctx.Deadline(); ok {
				c.SetDeadline(d)
			}
			_, err = c.Brokers()
			c.Close()
			if err == nil {
				return nil
			}
		}
		return err
	}
}
