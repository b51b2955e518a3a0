package kafkalog

import (
	"errors"
	"fmt"
)

// Kind classifies a refusal so the HTTP layer can pick the protocol's
// status code for it.
type Kind int

const (
	// BadRequest: malformed or out-of-range input (HTTP 400).
	BadRequest Kind = iota + 1
	// NotFound: no such stream (HTTP 404).
	NotFound
	// Gone: the stream is soft-deleted, or the offset is older than what
	// Kafka still retains (HTTP 410).
	Gone
	// Conflict: the request contradicts the stream's state: different
	// create configuration, closed stream, content-type mismatch, Stream-Seq
	// regression, producer seq gap (HTTP 409).
	Conflict
	// Fenced: a producer epoch older than the current one (HTTP 403).
	Fenced
	// Unavailable: Kafka did not acknowledge the write (HTTP 503). Nothing
	// is acknowledged; the caller may retry.
	Unavailable
)

// Error is a refusal with its Kind and a short reason for the client.
type Error struct {
	Kind Kind
	Msg  string
	Err  error // underlying cause, if any
	// Gone says why a Gone refusal refuses: GoneDeleted, GoneGeneration
	// or GoneRetention.
	Gone string
}

// Why a Gone error refuses (the HTTP layer sends it as the
// Forklab-Gone-Reason header of the 410).
const (
	// GoneDeleted: the stream is deleted (its data kept for its forks).
	GoneDeleted = "deleted"
	// GoneGeneration: the offset belongs to an earlier generation of the
	// stream (or of a source it inherits from), which was deleted and
	// created again; the current generation reads from -1.
	GoneGeneration = "generation"
	// GoneRetention: the offset is older than what Kafka still retains.
	GoneRetention = "retention"
)

// GoneReason returns why err, a Gone refusal, refuses (GoneDeleted,
// GoneGeneration, GoneRetention); "" for any other error.
func GoneReason(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Kind == Gone {
		return e.Gone
	}
	return ""
}

// Error returns the reason, with the cause when there is one.
func (e *Error) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

func errf(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...)}
}

// KindOf returns the Kind of err, or 0 if err is not a refusal.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}

var (
	errNotFound  = errf(NotFound, "stream not found")
	errSoftGone  = &Error{Kind: Gone, Gone: GoneDeleted, Msg: "stream was deleted (its data is kept for its forks)"}
	errRetention = &Error{Kind: Gone, Gone: GoneRetention, Msg: "offset is older than the retained range of the log"}
)
