package kafkalog

import (
	"context"

	"github.com/forklab/forklab/stream/fence"
)

// AppendRequest is a parsed POST (protocol §5.2, §5.3).
type AppendRequest struct {
	Name        string
	ContentType string // "" when absent; required when Body is not empty
	Body        []byte
	Close       bool // Stream-Closed: true
	// Producer headers (§5.2.1), all or none.
	HasProducer bool
	ProducerID  string
	Epoch, Seq  int64
	StreamSeq   string // Stream-Seq, "" when absent
}

// Outcome says what an accepted append did.
type Outcome int

const (
	// Appended: the body was written (and the stream closed, if asked).
	Appended Outcome = iota + 1
	// ClosedOnly: a close without data was written.
	ClosedOnly
	// AlreadyClosed: a close-only request on a closed stream; nothing written.
	AlreadyClosed
	// Duplicate: an idempotent producer repeated an accepted seq; nothing
	// written.
	Duplicate
)

// AppendResult reports an append, accepted or refused.
type AppendResult struct {
	Outcome Outcome
	// Tail is the tail offset after the request (on refusals, the current
	// tail: the protocol sends it with a closed-stream 409).
	Tail   Offset
	Closed bool
	// ProducerEpoch and ProducerSeq are the Producer-Epoch and Producer-Seq
	// response headers: the epoch in force and the highest seq accepted in
	// it; on a stale-epoch 403, ProducerEpoch is the current epoch.
	ProducerEpoch, ProducerSeq int64
	HasProducer                bool
	// ExpectedSeq and ReceivedSeq accompany a sequence gap (409).
	ExpectedSeq, ReceivedSeq int64
	SeqGap                   bool
}

// Append appends to a stream, closes it, or both, under the protocol's rules
// for closure (§5.2, §5.3), content type, Stream-Seq and idempotent
// producers (§5.2.1). It answers only after Kafka acknowledged the record.
func (l *Log) Append(ctx context.Context, req AppendRequest) (AppendResult, error) {
	s, err := l.lookup(req.Name)
	if err != nil {
		return AppendResult{}, err
	}
	s.touch()
	// One allocation holds the op, its record and its answer.
	c := &appendCall{r: record{
		op: opAppend, stream: req.Name, gen: s.meta.gen, contentType: s.meta.contentType,
		value: req.Body, closed: req.Close, streamSeq: req.StreamSeq, ttl: -1, forkCut: -1, forkCutKoff: -1,
		hasProducer: req.HasProducer, producerID: req.ProducerID, epoch: req.Epoch, seq: req.Seq,
	}}
	r := &c.r
	if len(req.Body) == 0 {
		r.op = opClose
	}
	// A JSON stream's appends must be valid JSON and not [] (§9.1.3,
	// §9.1.4). Checked here, off the partition goroutine, but refused in
	// decideAppend, after the closed and content-type checks that take
	// precedence (§5.2 Error Precedence).
	if len(req.Body) > 0 && s.meta.json && SameContentType(req.ContentType, s.meta.contentType) {
		c.badJSON = ValidateJSONAppend(req.Body)
	}
	c.l, c.s, c.req = l, s, req
	c.o.size = len(req.Body) + 512
	c.o.decide = c.decide
	_, err = l.parts[s.meta.part].submit(ctx, &c.o)
	if err != nil {
		return AppendResult{}, err
	}
	return c.res, c.err
}

// appendCall is one Append on its way through the partition goroutine.
type appendCall struct {
	o       op
	r       record
	pend    pending
	l       *Log
	s       *stream
	req     AppendRequest
	badJSON error // ValidateJSONAppend's verdict on a JSON stream's body
	res     AppendResult
	err     error
}

// decide is the op's decision (op.decide).
func (c *appendCall) decide(t *tx) *pending {
	p, e := c.l.decideAppend(t, c.s, c.req, c.badJSON, &c.r, &c.res, &c.pend)
	c.err = e
	return p
}

// decideAppend runs on the partition goroutine. badJSON is the verdict of
// ValidateJSONAppend on a JSON stream's body, nil otherwise.
// The pending write it returns is pend, filled in.
func (l *Log) decideAppend(t *tx, s *stream, req AppendRequest, badJSON error, r *record, out *AppendResult, pend *pending) (*pending, error) {
	v := s.snapshot()
	*out = AppendResult{Tail: s.mint(v.tail), Closed: s.w.closed}
	res := out
	if s.w.deleted {
		if s.w.soft {
			return nil, errSoftGone
		}
		return nil, errNotFound
	}
	// Closed first (§5.2 Error Precedence), except the exact request that
	// closed it, which is a duplicate.
	if s.w.closed {
		res.Closed = true
		if req.HasProducer && s.w.closer != nil && *s.w.closer == (producerTuple{req.ProducerID, req.Epoch, req.Seq}) {
			st := s.w.producers[req.ProducerID]
			res.Outcome, res.HasProducer, res.ProducerEpoch, res.ProducerSeq = Duplicate, true, st.Epoch, st.LastSeq
			return nil, nil
		}
		if len(req.Body) == 0 && req.Close {
			res.Outcome = AlreadyClosed
			return nil, nil
		}
		return nil, errf(Conflict, "stream is closed")
	}
	if len(req.Body) > 0 && !SameContentType(req.ContentType, s.meta.contentType) {
		// §5.2: 409 is for a valid media type that is not the stream's;
		// one that is not a media type at all is a malformed request.
		// (Judged only here, on a mismatch: no cost to a matching append.)
		if !IsMediaType(req.ContentType) {
			return nil, errf(BadRequest, "Content-Type %q is not a media type (type/subtype): send the stream's, %q", req.ContentType, s.meta.contentType)
		}
		return nil, errf(Conflict, "content type %q does not match the stream's %q", req.ContentType, s.meta.contentType)
	}
	if badJSON != nil {
		return nil, badJSON
	}
	if req.HasProducer {
		st := s.w.producers[req.ProducerID]
		d := fence.Decide(st, fence.Request{Epoch: req.Epoch, Seq: req.Seq})
		res.HasProducer = true
		res.ProducerEpoch, res.ProducerSeq = d.CurrentEpoch, d.HighestSeq
		switch d.Verdict {
		case fence.StaleEpoch:
			return nil, errf(Fenced, "producer %q epoch %d is stale: epoch %d has taken over", req.ProducerID, req.Epoch, d.CurrentEpoch)
		case fence.BadEpochStart:
			// A producer the stream has never seen has no epoch to
			// name: no Producer-Epoch (it read 0, an epoch the
			// stream never accepted).
			res.HasProducer = st.Known
			return nil, errf(BadRequest, "producer %q epoch %d must start at seq 0, got %d", req.ProducerID, req.Epoch, req.Seq)
		case fence.SeqGap:
			res.SeqGap, res.ExpectedSeq, res.ReceivedSeq = true, d.ExpectedSeq, req.Seq
			return nil, errf(Conflict, "producer %q seq %d skips ahead: expected %d", req.ProducerID, req.Seq, d.ExpectedSeq)
		case fence.Duplicate:
			res.Outcome = Duplicate
			return nil, nil
		}
	}
	if req.StreamSeq != "" && s.w.streamSeq != "" && req.StreamSeq <= s.w.streamSeq {
		return nil, errf(Conflict, "Stream-Seq %q is not greater than the last one, %q", req.StreamSeq, s.w.streamSeq)
	}
	t.touchFields(s)
	if req.HasProducer {
		t.touchProducer(s, req.ProducerID)
	}
	r.rec = s.w.allocRec()
	s.w.apply(r)
	if len(req.Body) > 0 {
		res.Outcome = Appended
	} else {
		res.Outcome = ClosedOnly
	}
	part := s.meta.part
	*pend = pending{rec: r, commit: func(koff int64) {
		if len(r.value) > 0 {
			l.cache.put(part, koff, r.value)
		}
		// The tail right after this record, not after the whole batch:
		// a client reading from it must not skip records that other
		// requests in the same produce wrote after its own.
		out.Tail = s.mint(s.applyR(r, koff))
		out.Closed = s.w.closed || r.closed
	}}
	return pend, nil
}
