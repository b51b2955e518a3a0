package agentproc

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Fail fast: a sweep whose agent fails (a stray print on stdout, a crash
// on import, a missing API key) stops within a minute, saying why, instead
// of restarting the agent for hours (docs/agent-protocol.md, "Failing
// fast"; Inspect AI's fail_on_error is the model). An attempt is one line
// sent to an agent process — a request, or a batch of them — or the start
// of a process; it failed when the process failed it (it exited, hung,
// wrote something that is not the reply, failed to start or to answer
// initialize) or when every request in it was answered with an error
// (every branch of a branch request reported as failed included). Two
// rules stop the work:
//
//   - the first attempts all fail: FirstFailures of them, or at least
//     FirstWindowFailures in the FirstWindow after the first was sent,
//     before any succeeded;
//   - more than FailFast.MaxRate of the last RateWindow attempts failed.
const (
	FirstFailures       = 20
	FirstWindow         = 30 * time.Second
	FirstWindowFailures = 3
	RateWindow          = 100
	// DefaultFailOnError is FailFast.MaxRate's default: half the last
	// RateWindow attempts.
	DefaultFailOnError = 0.5
)

// FailFast turns fail-fast on for a pool (Config.FailFast).
type FailFast struct {
	// MaxRate is the share of the last RateWindow attempts that may fail
	// before the work stops; 1 or more: no limit by rate (the first
	// attempts' rule still holds).
	MaxRate float64
}

// ErrFailing marks work stopped because the agent is failing: errors.Is
// holds for a *FailingError.
var ErrFailing = errors.New("the agent is failing")

// FailingError says why the work stopped: Rule is the rule that stopped
// it ("its first 20 attempts failed, none succeeded"), Last the last
// failure's text as an error row would carry it (the line the agent wrote
// where a reply was expected, its exit status, the last line of its
// stderr), Failed and Attempts the counts so far.
type FailingError struct {
	Rule             string
	Last             string
	Failed, Attempts int64
	last             error
}

func (e *FailingError) Error() string {
	return fmt.Sprintf("the agent is failing: %s; the last failure: %s", e.Rule, e.Last)
}

// Is makes errors.Is(err, ErrFailing) hold.
func (e *FailingError) Is(target error) bool { return target == ErrFailing }

// Unwrap gives the last failure.
func (e *FailingError) Unwrap() error { return e.last }

// breaker counts attempts and trips on the fail-fast rules; safe for
// concurrent use. A nil breaker counts nothing and never trips.
type breaker struct {
	maxRate float64
	now     func() time.Time

	mu       sync.Mutex
	first    time.Time // when the first attempt was sent
	ok, bad  int64
	ring     [RateWindow]bool // recent attempts: failed?
	n, pos   int
	inRing   int // failures in ring
	err      *FailingError
	tripped  chan struct{}
	onceTrip sync.Once
}

func newBreaker(f *FailFast) *breaker {
	if f == nil {
		return nil
	}
	return &breaker{maxRate: f.MaxRate, now: time.Now, tripped: make(chan struct{})}
}

// begin notes that work is being sent: the first attempts' window starts
// with the first.
func (b *breaker) begin() {
	if b == nil {
		return
	}
	b.mu.Lock()
	if b.first.IsZero() {
		b.first = b.now()
	}
	b.mu.Unlock()
}

// record counts one attempt, failed with cause or not, and trips when a
// rule says so.
func (b *breaker) record(failed bool, cause error) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return
	}
	if b.first.IsZero() {
		b.first = b.now()
	}
	if b.n == RateWindow && b.ring[b.pos] {
		b.inRing--
	}
	b.ring[b.pos] = failed
	b.pos = (b.pos + 1) % RateWindow
	b.n = min(b.n+1, RateWindow)
	if !failed {
		b.ok++
		return
	}
	b.bad++
	b.inRing++
	var rule string
	switch since := b.now().Sub(b.first); {
	case b.ok == 0 && b.bad >= FirstFailures:
		rule = fmt.Sprintf("its first %d attempts failed, none succeeded", b.bad)
	case b.ok == 0 && b.bad >= FirstWindowFailures && since >= FirstWindow:
		rule = fmt.Sprintf("every attempt in its first %s failed (%d of them), none succeeded", since.Round(time.Second), b.bad)
	case b.n == RateWindow && float64(b.inRing) > b.maxRate*RateWindow:
		rule = fmt.Sprintf("%d of its last %d attempts failed, more than --fail-on-error %s allows", b.inRing, RateWindow, shareText(b.maxRate))
	default:
		return
	}
	b.err = &FailingError{Rule: rule, Last: errText(cause), Failed: b.bad, Attempts: b.ok + b.bad, last: cause}
	b.onceTrip.Do(func() { close(b.tripped) })
}

// failure is the error that tripped the breaker, nil while it has not.
func (b *breaker) failure() error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		return nil
	}
	return b.err
}

// done is closed when the breaker trips; nil for a nil breaker.
func (b *breaker) done() <-chan struct{} {
	if b == nil {
		return nil
	}
	return b.tripped
}

// shareText writes a share as a percentage: 50%, 12.5%.
func shareText(x float64) string {
	s := fmt.Sprintf("%.4g", 100*x)
	if strings.Contains(s, "e") {
		s = fmt.Sprintf("%g", 100*x)
	}
	return s + "%"
}
