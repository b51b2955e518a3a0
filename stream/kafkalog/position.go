package kafkalog

import (
	"fmt"
	"math"
)

// Which offsets a stream issues, and which it accepts back.
//
// A stream's positions are Kafka offsets in its partition. The positions it
// hands out (Stream-Next-Offset, Forklab-Earliest-Offset, the tail in HEAD
// and in append answers) are its boundaries:
//
//   - one past its create record (the tail of a new stream),
//   - one past each record of its view (the tail after an append, and the
//     end of a read chunk),
//   - for a stream whose create record fell out of retention, the
//     partition's log start offset (the first position it still knows).
//
// It accepts back one position more: the partition's log start offset for
// any stream that existed before it (its create record lies below it).
// That is the first position a reader of the topic knows once retention
// removed what lay below (Replay.ReadFrom hands it out, as a restarted
// service does for a trimmed stream), and a read from it returns what the
// stream still holds, whether or not this service's index kept the
// records Kafka removed.
//
// A fork reads its source's records up to the fork point: positions up to
// it are its source's (recursively), so the fork issues the same offsets
// there as its source did (§8, "no offset translation"), and accepts them.
//
// Every issued offset is stamped with the name and generation of the stream
// that owns the position (offsetSum). An offset handed back is resolved
// against the stream it is used on: its stamp must name a stream of the
// stream's lineage, the position must lie in what the stream inherits from
// that member and be one of that member's boundaries. An offset of an
// earlier generation of a lineage member is 410 Gone (the data it pointed
// into was deleted; read the new generation from -1); any other offset the
// stream never issued is 400.

// lineage is a stream generation as the offsets it issues see it: the
// name, generation and partition that stamp them and, for a fork, the
// source it inherits from and the fork point. The service's streams and
// Replay's (replay.go) both are one, so that a reader of the topic mints
// exactly the offsets the service issues.
type lineage[T any] interface {
	stamper() (name string, gen int64, part int32)
	// inherits returns the source and the fork point (positions up to it
	// are the source's); ok is false for a root, or a fork whose source
	// was not found (it inherits nothing).
	inherits() (src T, forkPos int64, ok bool)
}

// mintIn is the offset stream generation s issues for position pos:
// stamped by the lineage member that owns the position, the first one,
// walking from s to its sources, whose own range holds pos.
func mintIn[T lineage[T]](s T, pos int64) Offset {
	for {
		src, forkPos, ok := s.inherits()
		if !ok || pos > forkPos {
			break
		}
		s = src
	}
	name, gen, part := s.stamper()
	return stamp(name, gen, part, pos)
}

func (s *stream) stamper() (string, int64, int32) { return s.meta.name, s.meta.gen, s.meta.part }
func (s *stream) inherits() (*stream, int64, bool) {
	return s.meta.source, s.meta.forkPos, s.meta.source != nil
}

// mint is the offset s issues for position pos (mintIn).
func (s *stream) mint(pos int64) Offset { return mintIn(s, pos) }

// forkPoint is the fork point of the fork a create record describes, as
// the log's start reads it (and Replay): the position its Stream-Fork-Offset
// header names (records of earlier versions carry it in the bare form), -1
// for the beginning (Zero), or srcTail, the source's tail, when the header
// does not parse.
func forkPoint(r *record, srcTail int64) int64 {
	off, err := ParseOffset(r.forkOffset)
	switch {
	case err != nil:
		return srcTail
	case off.IsZero():
		return -1
	}
	return off.Pos
}

// boundary reports whether pos is one of the boundaries of a stream view.
func (v view) boundary(pos int64) bool {
	if v.createKoff >= 0 && pos == v.createKoff+1 {
		return true
	}
	i := firstAtOrAfter(v.entries, pos-1)
	return i < len(v.entries) && v.entries[i].koff == pos-1
}

// incomplete reports whether the index of s's view lacks records Kafka no
// longer retains: s or a source it inherits from lost its create record to
// retention before the log was rebuilt, so records below the log start
// offset are not in the index.
func (s *stream) incomplete() bool {
	for o := s; o != nil; o = o.meta.source {
		if o.meta.trimmed {
			return true
		}
	}
	return false
}

// errNotIssued is the refusal of an offset s never issued.
func (s *stream) errNotIssued(o Offset, why string) error {
	return errf(BadRequest, "offset %s was not issued for stream %q: %s; use a Stream-Next-Offset the server returned for it, -1 or now", o, s.meta.name, why)
}

// resolve maps an offset a client handed back for s onto a position of
// s's view v: -1 for the beginning (the bare Zero offset), else the Kafka
// offset. ls is the partition's log start offset. Errors: Gone for an
// offset of an earlier generation of s or of a source s inherits from;
// Gone for a position Kafka no longer retains (errRetention); BadRequest
// for any other offset s never issued.
func (s *stream) resolve(o Offset, v view, ls int64) (int64, error) {
	if o.IsZero() {
		return -1, nil
	}
	if o.Gen == 0 {
		return 0, s.errNotIssued(o, "it carries no stream stamp")
	}
	limit := int64(math.MaxInt64) // positions s inherits from the member
	for m := s; m != nil; m = m.meta.source {
		if offsetSum(m.meta.name, o.Gen, o.Partition, o.Pos) != o.Sum {
			if m.meta.source != nil {
				limit = min(limit, m.meta.forkPos)
			}
			continue
		}
		switch {
		case o.Gen < m.meta.gen:
			return 0, &Error{Kind: Gone, Gone: GoneGeneration, Msg: fmt.Sprintf(
				"offset %s belongs to generation %d of stream %q, which was deleted; generation %d has replaced it: read it from -1",
				o, o.Gen, m.meta.name, m.meta.gen)}
		case o.Gen > m.meta.gen:
			return 0, s.errNotIssued(o, "its generation does not exist")
		case o.Partition != m.meta.part:
			return 0, s.errNotIssued(o, "wrong partition")
		case o.Pos > limit:
			return 0, s.errNotIssued(o, "it lies beyond the fork point")
		case m.meta.source != nil && o.Pos <= m.meta.forkPos:
			return 0, s.errNotIssued(o, "it lies in the inherited range")
		}
		mv := v
		if m != s {
			mv = m.snapshot()
		}
		// The log start: for an incomplete index the first position it
		// knows; for a complete one, the position a reader of the topic
		// knows once retention removed the records below it (the member
		// existed then: its create lies below).
		atLogStart := o.Pos == ls && (s.incomplete() || mv.createKoff < ls)
		if mv.boundary(o.Pos) || atLogStart {
			if o.Pos > v.tail {
				return 0, s.errNotIssued(o, "it lies beyond the tail")
			}
			return o.Pos, nil
		}
		if o.Pos < ls && (s.incomplete() || mv.createKoff < o.Pos) {
			// A log start issued before retention moved it on.
			return 0, errRetention
		}
		return 0, s.errNotIssued(o, "it is not a boundary between the stream's records")
	}
	return 0, s.errNotIssued(o, "it belongs to another stream")
}

// retained reports whether a read of view v from pos finds every record it
// should: the first record it would return is one Kafka still retains, and
// (for an incomplete index) pos is not below the log start.
func (s *stream) retained(v view, pos, ls int64) bool {
	if pos >= ls {
		return true
	}
	if s.incomplete() {
		return false
	}
	i := firstAtOrAfter(v.entries, pos)
	return i >= len(v.entries) || v.entries[i].koff >= ls
}

// earliest is the first position of view v a reader can read from without
// meeting a record Kafka no longer retains: right after the last dropped
// record of the view, or -1 (the beginning) when none was dropped; for an
// incomplete index, the log start offset itself.
func (s *stream) earliest(v view, ls int64) int64 {
	if s.incomplete() {
		if ls > v.tail {
			return v.tail
		}
		return ls
	}
	i := firstAtOrAfter(v.entries, ls)
	if i > 0 {
		return v.entries[i-1].koff + 1
	}
	return -1
}
