package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Appender appends to one stream as one idempotent producer (§5.2.1): a
// producer id, an epoch and a seq that starts at 0 in each epoch and grows
// by one per accepted append. It is safe for concurrent use; appends are
// sent one at a time, in order.
type Appender struct {
	c           *Client
	stream      string
	id          string
	contentType string

	// ClaimOnFence makes the appender claim a new epoch (the current one
	// plus one, seq 0) after a 403 and resend, instead of failing with a
	// FencedError. It is the protocol's auto-claim flow for ephemeral
	// producers; a worker that may be a zombie must leave it off.
	ClaimOnFence bool
	// MaxAttempts bounds the sends of one append across retries; default 8.
	MaxAttempts int
	// Backoff is the first retry delay, doubling up to 2s; default 50ms.
	// A 503 or 429 with Retry-After waits what the server asks instead
	// (at most 30s).
	Backoff time.Duration
	// AttemptTimeout bounds one send: a server that has not answered by
	// then is given up on and the append resent with the same seq.
	// Default 30s (the server answers a write Kafka has not acknowledged
	// within its --append-timeout, 10s by default, with a 503).
	AttemptTimeout time.Duration

	mu    sync.Mutex
	epoch int64
	seq   int64 // seq of the next append
	last  string
}

// NewAppender returns an appender for producer id at epoch, starting at
// seq 0. contentType must be the stream's.
func (c *Client) NewAppender(stream, producerID string, epoch int64, contentType string) *Appender {
	return &Appender{c: c, stream: stream, id: producerID, epoch: epoch, contentType: contentType}
}

// ClaimNextEpoch returns an appender for the producer's next incarnation:
// one past the epoch the stream last saw from producerID (0 for a new
// producer), at seq 0. The claim takes effect with the first append, which
// fences every older incarnation. Two incarnations must not claim at the
// same time: both would get the same epoch.
func (c *Client) ClaimNextEpoch(ctx context.Context, stream, producerID, contentType string) (*Appender, error) {
	epoch, _, known, err := c.ProducerState(ctx, stream, producerID)
	if err != nil {
		return nil, err
	}
	next := int64(0)
	if known {
		next = epoch + 1
	}
	return c.NewAppender(stream, producerID, next, contentType), nil
}

// Epoch is the appender's current epoch.
func (a *Appender) Epoch() int64 { a.mu.Lock(); defer a.mu.Unlock(); return a.epoch }

// Seq is the seq the next append will carry.
func (a *Appender) Seq() int64 { a.mu.Lock(); defer a.mu.Unlock(); return a.seq }

// Offset is the stream's tail after the last successful append.
func (a *Appender) Offset() string { a.mu.Lock(); defer a.mu.Unlock(); return a.last }

// AppendResult reports one append.
type AppendResult struct {
	// Next is the stream's tail after the append.
	Next string
	// Duplicate: the server had this seq already (an earlier attempt whose
	// answer was lost reached it); nothing was written twice.
	Duplicate bool
	Epoch     int64
	Seq       int64
}

// Append appends data with the next seq. Network errors and 503s are
// retried with the same seq, so the data is written at most once; a 204
// duplicate answer is success. A 403 is a FencedError unless ClaimOnFence; a
// 409 gap is a GapError.
func (a *Appender) Append(ctx context.Context, data []byte) (AppendResult, error) {
	return a.send(ctx, data, false)
}

// Close appends final data (if any) and closes the stream in one step.
func (a *Appender) Close(ctx context.Context, final []byte) (AppendResult, error) {
	return a.send(ctx, final, true)
}

func (a *Appender) send(ctx context.Context, data []byte, closing bool) (AppendResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	attempts := a.MaxAttempts
	if attempts <= 0 {
		attempts = 8
	}
	delay := a.Backoff
	if delay <= 0 {
		delay = 50 * time.Millisecond
	}
	perAttempt := a.AttemptTimeout
	if perAttempt <= 0 {
		perAttempt = 30 * time.Second
	}
	var lastErr error
	var retryAfter time.Duration
	for try := 0; try < attempts; try++ {
		if try > 0 {
			wait := delay
			if retryAfter > 0 {
				wait = retryAfter
			}
			select {
			case <-ctx.Done():
				return AppendResult{}, ctx.Err()
			case <-time.After(wait):
			}
			delay = min(2*delay, 2*time.Second)
			retryAfter = 0
		}
		h := http.Header{}
		if len(data) > 0 {
			h.Set("Content-Type", a.contentType)
		}
		h.Set("Producer-Id", a.id)
		h.Set("Producer-Epoch", strconv.FormatInt(a.epoch, 10))
		h.Set("Producer-Seq", strconv.FormatInt(a.seq, 10))
		if closing {
			h.Set("Stream-Closed", "true")
		}
		actx, cancel := context.WithTimeout(ctx, perAttempt)
		res, body, err := a.c.do(actx, http.MethodPost, a.c.URL(a.stream), h, data)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return AppendResult{}, ctx.Err()
			}
			lastErr = err // the request may or may not have arrived: resend the same seq
			continue
		}
		switch res.StatusCode {
		case http.StatusOK, http.StatusNoContent:
			r := AppendResult{Next: res.Header.Get("Stream-Next-Offset"), Epoch: a.epoch, Seq: a.seq}
			// 204 to a producer append with data is a duplicate (a close
			// without data always answers 204).
			r.Duplicate = res.StatusCode == http.StatusNoContent && len(data) > 0
			a.seq++
			a.last = r.Next
			return r, nil
		case http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusBadGateway, http.StatusGatewayTimeout:
			// Not acknowledged: it may or may not have landed. The
			// same seq again is answered as a duplicate if it did.
			lastErr = statusErr(res, body)
			retryAfter = parseRetryAfter(res.Header.Get("Retry-After"))
			continue
		case http.StatusForbidden:
			cur, perr := strconv.ParseInt(res.Header.Get("Producer-Epoch"), 10, 64)
			if perr != nil {
				return AppendResult{}, statusErr(res, body) // 403 from auth, not fencing
			}
			if a.ClaimOnFence {
				a.epoch, a.seq = cur+1, 0
				try-- // claiming is not a failed attempt
				continue
			}
			return AppendResult{}, &FencedError{Producer: a.id, Epoch: a.epoch, CurrentEpoch: cur}
		case http.StatusConflict:
			if exp, perr := strconv.ParseInt(res.Header.Get("Producer-Expected-Seq"), 10, 64); perr == nil {
				return AppendResult{}, &GapError{Expected: exp, Received: a.seq}
			}
			return AppendResult{}, statusErr(res, body)
		default:
			return AppendResult{}, statusErr(res, body)
		}
	}
	return AppendResult{}, fmt.Errorf("append to %s: %d attempts failed: %w", a.stream, attempts, errors.Join(lastErr))
}

// parseRetryAfter reads a Retry-After of delay-seconds (RFC 9110 §10.2.3),
// at most 30s; 0 when absent or not a number of seconds.
func parseRetryAfter(v string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0
	}
	return min(time.Duration(n)*time.Second, 30*time.Second)
}
