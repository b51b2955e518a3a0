// Package fence holds the idempotent-producer rules of the session log as a
// pure state machine: a producer's state and one append request go in, a
// verdict and the producer's next state come out. It knows nothing of HTTP or
// Kafka; the caller owns storage and must serialise Decide per (stream,
// producer id), committing Next only once the append it accepted is durable.
//
// The rules are those of the Durable Streams protocol, section 5.2.1
// ("Idempotent Producers"), which are Kafka's idempotent-producer rules lifted
// to HTTP:
//
//   - a producer is identified by its id; it declares an epoch (its
//     incarnation) and numbers its appends 0, 1, 2, … within that epoch;
//   - the next expected seq is accepted;
//   - a seq at or below the last accepted one is a duplicate: it is ignored
//     and answered as success, so a retry can never write twice;
//   - a seq above the next expected one is a gap and is rejected, naming the
//     expected seq;
//   - an epoch below the highest one seen is stale and is rejected, naming
//     the current epoch: this is the fence against a zombie worker;
//   - an epoch above the highest one seen must start at seq 0; it is accepted
//     and resets the sequence.
//
// A producer the stream has never seen behaves as if its epoch were below
// every valid epoch: its first append must carry seq 0.
package fence

import "fmt"

// MaxValue is the largest epoch or seq the protocol allows, 2^53-1, so that
// JavaScript clients can represent every value exactly (protocol §5.2.1).
const MaxValue = 1<<53 - 1

// State is what the log remembers about one producer on one stream.
// The zero value is a producer the stream has never seen.
type State struct {
	// Known reports whether the producer has had an append accepted.
	Known bool
	// Epoch is the highest epoch accepted from the producer.
	Epoch int64
	// LastSeq is the highest seq accepted within Epoch.
	LastSeq int64
}

// Request is the producer part of one append: the Producer-Epoch and
// Producer-Seq header values, already parsed and range-checked.
type Request struct {
	Epoch int64
	Seq   int64
}

// Verdict is the outcome of Decide.
type Verdict int

const (
	// Accept: append the data and commit Next. HTTP 200.
	Accept Verdict = iota + 1
	// Duplicate: the seq was already accepted in this epoch; write nothing
	// and answer success. HTTP 204.
	Duplicate
	// StaleEpoch: the epoch is below the current one; the writer is a
	// zombie and is fenced. HTTP 403 with Producer-Epoch: CurrentEpoch.
	StaleEpoch
	// SeqGap: the seq skips ahead of the next expected one. HTTP 409 with
	// Producer-Expected-Seq: ExpectedSeq, Producer-Received-Seq: the seq.
	SeqGap
	// BadEpochStart: a new epoch (or a new producer) did not start at seq 0.
	// HTTP 400.
	BadEpochStart
)

// String names the verdict, e.g. "stale-epoch".
func (v Verdict) String() string {
	switch v {
	case Accept:
		return "accept"
	case Duplicate:
		return "duplicate"
	case StaleEpoch:
		return "stale-epoch"
	case SeqGap:
		return "seq-gap"
	case BadEpochStart:
		return "bad-epoch-start"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// Decision is the result of Decide.
type Decision struct {
	Verdict Verdict
	// Next is the producer state to commit once the append is durable. It
	// equals the input state for every verdict but Accept.
	Next State
	// CurrentEpoch is the producer's current epoch (StaleEpoch) or the
	// epoch now in force (Accept, Duplicate).
	CurrentEpoch int64
	// HighestSeq is the highest seq accepted in the current epoch after this
	// request (Accept, Duplicate): the protocol's Producer-Seq response
	// header.
	HighestSeq int64
	// ExpectedSeq is the seq the log expected (SeqGap, BadEpochStart).
	ExpectedSeq int64
}

// Decide applies the producer rules to one request. It is a pure function.
func Decide(s State, r Request) Decision {
	switch {
	case !s.Known || r.Epoch > s.Epoch:
		// A new producer, or a new incarnation of a known one.
		if r.Seq != 0 {
			return Decision{Verdict: BadEpochStart, Next: s, CurrentEpoch: s.Epoch, ExpectedSeq: 0}
		}
		next := State{Known: true, Epoch: r.Epoch, LastSeq: 0}
		return Decision{Verdict: Accept, Next: next, CurrentEpoch: r.Epoch, HighestSeq: 0}
	case r.Epoch < s.Epoch:
		return Decision{Verdict: StaleEpoch, Next: s, CurrentEpoch: s.Epoch}
	case r.Seq <= s.LastSeq:
		return Decision{Verdict: Duplicate, Next: s, CurrentEpoch: s.Epoch, HighestSeq: s.LastSeq}
	case r.Seq == s.LastSeq+1:
		next := State{Known: true, Epoch: s.Epoch, LastSeq: r.Seq}
		return Decision{Verdict: Accept, Next: next, CurrentEpoch: s.Epoch, HighestSeq: r.Seq}
	default:
		return Decision{Verdict: SeqGap, Next: s, CurrentEpoch: s.Epoch, ExpectedSeq: s.LastSeq + 1, HighestSeq: s.LastSeq}
	}
}

// Replay folds an accepted request into s the way Decide's Accept would,
// without judging it. The log uses it when rebuilding producer state from the
// records already in Kafka, which were accepted when they were written.
func Replay(s State, r Request) State {
	if !s.Known || r.Epoch > s.Epoch || (r.Epoch == s.Epoch && r.Seq > s.LastSeq) {
		return State{Known: true, Epoch: r.Epoch, LastSeq: r.Seq}
	}
	return s
}
