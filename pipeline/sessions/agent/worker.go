// Package agent runs agent sessions on the session log: a worker plays one
// session of any registered fork-lab world (lab.Lookup) with its scripted
// fake model and appends every event to the session's stream, so that the
// session's state lives in the log rather than in the worker.
//
// A worker is one incarnation of its session. The session name is the
// producer id and the incarnation is the epoch (docs/epochs.md): on start a
// worker reads the stream from the beginning and folds it (package session)
// — refusing, before writing anything, a stream it cannot fold — then claims
// the next epoch by appending an incarnation event, which fences every older
// incarnation: a hung worker that wakes up is refused (403) on its next
// append. The worker then reads what was appended before its claim took
// effect, checks that the claim is its own, and continues the session from
// the exact folded state. A session interrupted and resumed any number of
// times ends with the same domain events and outcome as an uninterrupted
// run, because every event is a pure function of the folded state.
package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/forklab/forklab/internal/plural"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/sessions/session"
	"github.com/forklab/forklab/stream/client"
)

// ContentType is the content type of session streams.
const ContentType = "application/json"

// ErrFinished reports a session that already has its outcome.
var ErrFinished = errors.New("session already finished")

// ErrFenced reports a worker that a newer incarnation has fenced, or whose
// claim another incarnation beat.
var ErrFenced = errors.New("fenced by a newer incarnation")

// ErrClosed reports a worker whose append met a session that another
// incarnation finished and closed meanwhile; like ErrFenced it means this
// worker is a zombie, refused before writing.
var ErrClosed = errors.New("session closed")

// ErrNoSession reports a session to resume (Worker.Start nil) whose stream
// does not exist.
var ErrNoSession = errors.New("no such session: its stream does not exist")

// ErrForeign reports a stream that holds another session than the one asked
// for.
var ErrForeign = errors.New("stream holds another session")

// Worker runs one incarnation of one session.
type Worker struct {
	// Log is the session log.
	Log *client.Client
	// Stream is the session's stream; Producer its producer id (default:
	// Stream).
	Stream, Producer string
	// Start is the session_start event written to a new stream and
	// compared with an existing one's.
	Start *session.Event
	// Fork, if set, makes the session a branch: the fork event is appended
	// once, before the branch's own turns.
	Fork *session.Event
	// Until > 0 stops the session after the prefix to that fork step.
	Until int
	// Delay pauses between appends (to let chaos tests land kills
	// mid-session).
	Delay time.Duration
	// RetryFor bounds how long an unreachable log is retried (default 2m).
	RetryFor time.Duration
	// FailFast gives up at once, instead of retrying for RetryFor, when
	// the worker's first request finds no log at all (connection refused,
	// unknown host: client.Unreachable): nobody started it. A log that
	// answered once and then stops answering (restarting) is retried.
	FailFast bool
	// Logf reports progress and retries; nil is silent.
	Logf func(format string, args ...any)
	// OnAppend, if set, is called after each acknowledged domain event
	// with the stream's tail after it.
	OnAppend func(e session.Event, tail string)

	// afterClaim, if set, runs between choosing the epoch and appending the
	// incarnation event (tests use it to race two claims).
	afterClaim func()
	// reached is set once the log has answered a request; shared, when
	// set, is set too, and read as reached: the workers of one sweep
	// --from-log share it, so a log that answered any of them is retried.
	reached bool
	shared  *atomic.Bool
}

// Result is what a worker did.
type Result struct {
	// Session is the fold of the whole stream at the end.
	Session session.Session
	// Appended counts the domain events this incarnation appended.
	Appended int
	// Epoch is this incarnation's epoch.
	Epoch int64
	// Tail is the stream's tail at the end.
	Tail string
}

func (w *Worker) logf(format string, args ...any) {
	if w.Logf != nil {
		w.Logf(format, args...)
	}
}

// retry runs op until it succeeds, fails with an error that retrying cannot
// fix, or RetryFor passes, backing off from 100ms to 3s and reporting each
// wait.
func (w *Worker) retry(ctx context.Context, what string, op func() error) error {
	limit := w.RetryFor
	if limit <= 0 {
		limit = 2 * time.Minute
	}
	deadline := time.Now().Add(limit)
	delay := 100 * time.Millisecond
	for {
		err := op()
		if err == nil || !client.Unreachable(err) {
			w.reached = true
			if w.shared != nil {
				w.shared.Store(true)
			}
		}
		if err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
		if w.FailFast && !w.reached && (w.shared == nil || !w.shared.Load()) {
			return fmt.Errorf("%s: %w", what, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: the session log did not answer for %s: %w", what, limit, err)
		}
		w.logf("%s: session log unavailable (%v); retrying in %s", what, err, delay)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 3*time.Second)
	}
}

// transient reports errors worth retrying: no answer, or a 5xx/429.
func transient(err error) bool {
	var fe *client.FencedError
	var ge *client.GapError
	if errors.As(err, &fe) || errors.As(err, &ge) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	switch code := client.StatusCode(err); {
	case code == 0:
		return true
	case code >= 500 || code == http.StatusTooManyRequests:
		return true
	}
	return false
}

// readFold reads the stream from offset to its tail and folds the events
// into s. It returns the tail.
func (w *Worker) readFold(ctx context.Context, s *session.Session, offset string) (string, error) {
	var data []byte
	var next string
	err := w.retry(ctx, "read "+w.Stream, func() error {
		var err error
		data, next, err = w.Log.ReadAll(ctx, w.Stream, offset)
		return err
	})
	if err != nil {
		return offset, err
	}
	events, err := session.DecodeBatch(data)
	if err != nil {
		return offset, fmt.Errorf("%s: %w: %v", w.Stream, session.ErrFold, err)
	}
	for i, e := range events {
		if err := s.Apply(e); err != nil {
			return offset, fmt.Errorf("%s: event %d after %s: %w", w.Stream, i, offset, err)
		}
	}
	return next, nil
}

// Run runs the incarnation. It returns ErrFinished (wrapped) for a session
// that already has its outcome, ErrFenced when a newer incarnation owns the
// session, ErrForeign or a session.ErrFold error (having appended nothing)
// for a stream it must not continue.
func (w *Worker) Run(ctx context.Context) (Result, error) {
	if w.Producer == "" {
		w.Producer = w.Stream
	}
	var res Result
	s := &session.Session{}

	// 1. Read and fold everything, writing nothing yet.
	tail, err := w.readFold(ctx, s, client.Start)
	if client.IsNotFound(err) {
		if w.Start == nil {
			return res, fmt.Errorf("session %s: %w", w.Stream, ErrNoSession)
		}
		err = w.retry(ctx, "create "+w.Stream, func() error {
			_, _, err := w.Log.Create(ctx, w.Stream, client.CreateOptions{ContentType: ContentType})
			return err
		})
		if err == nil {
			tail, err = w.readFold(ctx, s, client.Start)
		}
	}
	if err != nil {
		return res, err
	}
	res.Session, res.Tail = *s, tail
	if s.Started && w.Start != nil && !bytes.Equal(s.Start.Encode(), w.Start.Encode()) {
		return res, fmt.Errorf("%s: %w: it holds %s, not the session asked for (%s)", w.Stream, ErrForeign, describeStart(s.Start), describeStart(*w.Start))
	}
	if s.Finished() {
		return res, fmt.Errorf("%s: %w (outcome folded from %s)", w.Stream, ErrFinished, plural.Count(s.Events, "event"))
	}

	// 2. Claim the next epoch: the first append of this incarnation fences
	// every older one.
	var app *client.Appender
	err = w.retry(ctx, "claim "+w.Stream, func() error {
		var err error
		app, err = w.Log.ClaimNextEpoch(ctx, w.Stream, w.Producer, ContentType)
		return err
	})
	if err != nil {
		return res, err
	}
	res.Epoch = app.Epoch()
	if w.afterClaim != nil {
		w.afterClaim()
	}
	nonce := newNonce()
	epoch := app.Epoch()
	marker := session.Event{Type: session.TypeIncarnation, Epoch: &epoch, Nonce: nonce, PID: os.Getpid(),
		At: time.Now().UTC().Format(time.RFC3339Nano)}
	if _, err := w.append(ctx, app, marker, false); err != nil {
		return res, err
	}

	// 3. Fold what older incarnations appended before the claim took
	// effect, and check the claim is ours.
	if tail, err = w.readFold(ctx, s, tail); err != nil {
		return res, err
	}
	if s.Nonce != nonce {
		return res, fmt.Errorf("%s: %w: epoch %d was claimed by another incarnation", w.Stream, ErrFenced, s.Epoch)
	}
	if app.Epoch() > 0 {
		// Counted as forklab log read lists them, incarnations included,
		// before this incarnation's own event.
		before := s.Incarnations - 1
		w.logf("%s: incarnation epoch %d resumes the session after %s (%s)", w.Stream, app.Epoch(), plural.Count(s.Events+before, "event"), plural.Count(before, "incarnation"))
	}

	// 4. Continue the session from the folded state.
	if !s.Started {
		if w.Start == nil {
			return res, fmt.Errorf("%s: %w: the stream has no session_start", w.Stream, session.ErrFold)
		}
		if err := w.step(ctx, app, s, *w.Start, &res, false); err != nil {
			return res, err
		}
	}
	if w.Fork != nil && s.Branch == nil {
		// A fork inside a turn first completes the turn.
		for !s.Between() {
			e, _, err := s.Next(0)
			if err != nil {
				return res, err
			}
			if err := w.step(ctx, app, s, e, &res, false); err != nil {
				return res, err
			}
		}
		if err := w.step(ctx, app, s, *w.Fork, &res, false); err != nil {
			return res, err
		}
	}
	for {
		e, ok, err := s.Next(w.Until)
		if err != nil {
			return res, fmt.Errorf("%s: %w", w.Stream, err)
		}
		if !ok {
			break
		}
		if err := w.step(ctx, app, s, e, &res, e.Type == session.TypeOutcome); err != nil {
			return res, err
		}
	}
	res.Session, res.Tail = *s, app.Offset()
	return res, nil
}

// step appends one domain event (closing the stream with it if last) and
// folds it.
func (w *Worker) step(ctx context.Context, app *client.Appender, s *session.Session, e session.Event, res *Result, last bool) error {
	if w.Delay > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(w.Delay):
		}
	}
	tail, err := w.append(ctx, app, e, last)
	if err != nil {
		return err
	}
	if err := s.Apply(e); err != nil {
		return fmt.Errorf("%s: own event refused by the fold (a bug): %w", w.Stream, err)
	}
	res.Appended++
	if w.OnAppend != nil {
		w.OnAppend(e, tail)
	}
	return nil
}

// append appends one event, retrying while the log is unreachable (with
// the same seq, so a retry is never written twice).
func (w *Worker) append(ctx context.Context, app *client.Appender, e session.Event, closing bool) (string, error) {
	var r client.AppendResult
	err := w.retry(ctx, "append to "+w.Stream, func() error {
		var err error
		if closing {
			r, err = app.Close(ctx, e.Encode())
		} else {
			r, err = app.Append(ctx, e.Encode())
		}
		return err
	})
	var fe *client.FencedError
	if errors.As(err, &fe) {
		return "", fmt.Errorf("%s: %w (epoch %d; the session is at epoch %d)", w.Stream, ErrFenced, fe.Epoch, fe.CurrentEpoch)
	}
	var se *client.StatusError
	if errors.As(err, &se) && se.Code == http.StatusConflict && se.Header.Get("Stream-Closed") == "true" {
		return "", fmt.Errorf("%s: %w: a newer incarnation finished and closed the session (409)", w.Stream, ErrClosed)
	}
	return r.Next, err
}

// describeStart names a session_start's world, seed, parameters and model
// for a refusal.
func describeStart(e session.Event) string {
	b, _ := json.Marshal(struct {
		P any         `json:"params"`
		M *fork.Model `json:"model"`
	}{e.Params, e.Model})
	seed := "?"
	if e.Seed != nil {
		seed = fmt.Sprint(*e.Seed)
	}
	return fmt.Sprintf("world %s seed %s %s", e.World, seed, b)
}

func newNonce() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}
