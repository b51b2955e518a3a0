package agentproc

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// The fail-fast rules (failfast.go), on a clock of the test's: the first
// attempts all failing — 20 of them, or 3 or more in the first 30 s — and
// more than the bound of the last 100 failing.
func TestBreakerRules(t *testing.T) {
	clock := time.Unix(0, 0)
	b := newBreaker(&FailFast{MaxRate: DefaultFailOnError})
	b.now = func() time.Time { return clock }
	cause := errors.New("agent process 1 (pid 7) wrote a malformed start reply: the line is not JSON: \"hello\"")
	for i := range FirstFailures - 1 {
		b.record(true, cause)
		if b.failure() != nil {
			t.Fatalf("tripped after %d failures", i+1)
		}
	}
	b.record(true, cause)
	err := b.failure()
	var fe *FailingError
	if !errors.As(err, &fe) || !errors.Is(err, ErrFailing) || fe.Rule != "its first 20 attempts failed, none succeeded" ||
		!strings.Contains(err.Error(), `the last failure: agent process 1 (pid 7) wrote a malformed start reply: the line is not JSON: "hello"`) {
		t.Fatalf("after 20 failures: %v", err)
	}
	select {
	case <-b.done():
	default:
		t.Fatal("done not closed")
	}

	// Three failures in the first 30 s, none succeeded.
	b = newBreaker(&FailFast{MaxRate: DefaultFailOnError})
	b.now = func() time.Time { return clock }
	b.begin()
	b.record(true, cause)
	b.record(true, cause)
	clock = clock.Add(FirstWindow)
	b.record(true, cause)
	if err := b.failure(); err == nil || !strings.Contains(err.Error(), "every attempt in its first 30s failed (3 of them), none succeeded") {
		t.Fatalf("3 failures over 30s: %v", err)
	}

	// One success: the first attempts' rule no longer holds; the window's
	// does, once more than half of the last 100 failed.
	for _, tc := range []struct {
		rate    float64
		trips   bool
		pattern string
	}{{0.5, true, "51 of its last 100 attempts failed, more than --fail-on-error 50% allows"}, {1, false, ""}} {
		b = newBreaker(&FailFast{MaxRate: tc.rate})
		b.now = func() time.Time { return clock }
		b.record(false, nil)
		for range 49 {
			b.record(false, nil)
		}
		for range 50 {
			b.record(true, cause)
		}
		if b.failure() != nil {
			t.Fatalf("rate %v: tripped at 50 of 100", tc.rate)
		}
		b.record(false, nil) // the oldest, a success, leaves the window
		b.record(true, cause)
		err := b.failure()
		if tc.trips != (err != nil) || tc.trips && !strings.Contains(err.Error(), tc.pattern) {
			t.Fatalf("rate %v: %v, want trip %t %q", tc.rate, err, tc.trips, tc.pattern)
		}
	}
	var nilBreaker *breaker
	nilBreaker.record(true, cause)
	if nilBreaker.failure() != nil || nilBreaker.done() != nil {
		t.Fatal("a nil breaker counts")
	}
}
