package kafkalog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"time"

	"github.com/forklab/forklab/stream/fence"
)

// A snapshot is the state of one partition of the data topic as the fold
// of its records up to an offset (Covered) leaves it: every stream of the
// partition (metadata, producer state, closure, deletion, the offset index)
// and the highest generation created and deleted per name. Loading it and
// replaying the records from Covered gives the state a full rebuild gives,
// in time independent of the log's size (snapshotstore.go keeps snapshots in
// a compacted topic; docs/session-log.md, "Snapshots").
//
// The encoding is binary, versioned by snapshotVersion: a snapshot of
// another version is ignored (a full rebuild runs).

// snapshotVersion is the snapshot format; bump it when the state changes.
const snapshotVersion = 1

// partSnapshot is the state of one partition, captured on its goroutine.
type partSnapshot struct {
	Partition int32
	Covered   int64 // the state is the fold of the records below this offset
	// Last identifies the record at Covered-1 (its key and headers), so
	// that a snapshot of a topic that was deleted and created again, or
	// truncated, is not taken for this one; 0 when Covered is 0.
	Last    uint32
	Streams []streamSnap
	Gens    map[string]int64 // highest generation created per name, from this partition's records
	Removed map[string]int64 // highest generation deleted per name

	slot string // the snapshot topic slot it was read from
}

// streamSnap is one stream generation's state.
type streamSnap struct {
	Name, ContentType, ForkedFrom, ForkOffset string
	Gen, TTL, ForkPos, ForkSub                int64
	ExpiresAt                                 time.Time
	Source                                    int  // index of the source in Streams; -1 for none
	Trimmed                                   bool // its create record fell out of retention
	Current                                   bool // the stream its name resolves to (not only a fork's source)

	NextRec, Burnt int64
	Producers      map[string]fence.State
	StreamSeq      string
	Closed         bool
	Closer         *producerTuple
	Deleted, Soft  bool
	Refs           int

	Entries    []entry
	Own        int
	CreateKoff int64
	Tail       int64
}

// capture snapshots partition p's state. It runs on p's goroutine (or
// before it starts), between batches, so the write state is the fold of
// Kafka's records below p.next.
func (l *Log) capture(p *partition) *partSnapshot {
	snap := &partSnapshot{Partition: p.id, Covered: p.next, Last: p.lastRecord,
		Gens: map[string]int64{}, Removed: map[string]int64{}}
	l.mu.RLock()
	var roots []*stream
	for _, s := range l.streams {
		if s.meta.part == p.id {
			roots = append(roots, s)
		}
	}
	for name, g := range p.gens {
		snap.Gens[name] = g
	}
	for name, g := range p.removed {
		snap.Removed[name] = g
	}
	l.mu.RUnlock()
	// Sources before the forks that inherit from them.
	current := map[*stream]bool{}
	for _, s := range roots {
		current[s] = true
	}
	index := map[*stream]int{}
	var add func(s *stream) int
	add = func(s *stream) int {
		if i, ok := index[s]; ok {
			return i
		}
		src := -1
		if s.meta.source != nil {
			src = add(s.meta.source)
		}
		v := s.snapshot()
		ss := streamSnap{
			Name: s.meta.name, ContentType: s.meta.contentType, ForkedFrom: s.meta.forkedFrom, ForkOffset: s.meta.forkOffset,
			Gen: s.meta.gen, TTL: s.meta.ttl, ForkPos: s.meta.forkPos, ForkSub: s.meta.forkSub, ExpiresAt: s.meta.expiresAt,
			Source: src, Trimmed: s.meta.trimmed, Current: current[s],
			NextRec: s.w.nextRec, Burnt: s.w.burnt, Producers: maps.Clone(s.w.producers), StreamSeq: s.w.streamSeq, Closed: s.w.closed,
			Closer: s.w.closer, Deleted: s.w.deleted, Soft: s.w.soft, Refs: s.w.refs,
			Entries: v.entries, CreateKoff: v.createKoff, Tail: v.tail,
		}
		s.mu.RLock()
		ss.Own = s.own
		s.mu.RUnlock()
		index[s] = len(snap.Streams)
		snap.Streams = append(snap.Streams, ss)
		return index[s]
	}
	for _, s := range roots {
		add(s)
	}
	return snap
}

// install makes the streams of a loaded snapshot the state of partition p.
// It runs before p's goroutine starts.
func (l *Log) install(p *partition, snap *partSnapshot) {
	made := make([]*stream, len(snap.Streams))
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, ss := range snap.Streams {
		m := meta{name: ss.Name, gen: ss.Gen, part: p.id, contentType: ss.ContentType, json: isJSON(ss.ContentType),
			ttl: ss.TTL, expiresAt: ss.ExpiresAt, forkedFrom: ss.ForkedFrom, forkOffset: ss.ForkOffset, forkPos: ss.ForkPos,
			forkSub: ss.ForkSub, trimmed: ss.Trimmed}
		if ss.Source >= 0 {
			m.source = made[ss.Source]
		}
		s := newStream(m)
		s.w = wstate{nextRec: ss.NextRec, burnt: ss.Burnt, producers: ss.Producers, streamSeq: ss.StreamSeq, closed: ss.Closed,
			closer: ss.Closer, deleted: ss.Deleted, soft: ss.Soft, refs: ss.Refs}
		if s.w.producers == nil {
			s.w.producers = map[string]fence.State{}
		}
		s.entries, s.own, s.createKoff, s.tail = ss.Entries, ss.Own, ss.CreateKoff, ss.Tail
		s.closed, s.soft = ss.Closed, ss.Soft
		s.producers = make(map[string]fence.State, len(ss.Producers))
		for id, st := range ss.Producers {
			s.producers[id] = st
		}
		made[i] = s
		if ss.Current {
			l.streams[ss.Name] = s
		}
	}
	for name, g := range snap.Gens {
		p.gens[name] = g
		l.gens[name] = max(l.gens[name], g)
	}
	for name, g := range snap.Removed {
		p.removed[name] = g
		l.removed[name] = max(l.removed[name], g)
	}
	p.next, p.lastRecord = snap.Covered, snap.Last
	p.restored, p.covered, p.snapshotSlot = true, snap.Covered, snap.slot
}

// encode renders a snapshot in its binary form.
func (snap *partSnapshot) encode() []byte {
	var w enc
	w.uvarint(snapshotVersion)
	w.varint(int64(snap.Partition))
	w.varint(snap.Covered)
	w.uvarint(uint64(snap.Last))
	w.names(snap.Gens)
	w.names(snap.Removed)
	w.uvarint(uint64(len(snap.Streams)))
	for _, s := range snap.Streams {
		w.str(s.Name)
		w.str(s.ContentType)
		w.str(s.ForkedFrom)
		w.str(s.ForkOffset)
		w.varint(s.Gen)
		w.varint(s.TTL)
		w.varint(s.ForkPos)
		w.varint(s.ForkSub)
		if s.ExpiresAt.IsZero() {
			w.varint(math.MinInt64)
		} else {
			w.varint(s.ExpiresAt.UnixNano())
		}
		w.varint(int64(s.Source))
		w.varint(s.NextRec)
		w.varint(s.Burnt)
		w.uvarint(uint64(len(s.Producers)))
		for id, st := range s.Producers {
			w.str(id)
			w.bool(st.Known)
			w.varint(st.Epoch)
			w.varint(st.LastSeq)
		}
		w.str(s.StreamSeq)
		w.bool(s.Closer != nil)
		if s.Closer != nil {
			w.str(s.Closer.id)
			w.varint(s.Closer.epoch)
			w.varint(s.Closer.seq)
		}
		w.uvarint(flags(s.Trimmed, s.Closed, s.Deleted, s.Soft, s.Current))
		w.varint(int64(s.Refs))
		w.varint(s.CreateKoff)
		w.varint(s.Tail)
		w.varint(int64(s.Own))
		// The index, delta-coded: Kafka offsets increase, record
		// numbers mostly by one.
		w.uvarint(uint64(len(s.Entries)))
		prevK, prevR := int64(0), int64(0)
		for _, e := range s.Entries {
			w.varint(e.koff - prevK)
			w.varint(e.rec - prevR)
			w.varint(int64(e.cut))
			prevK, prevR = e.koff, e.rec
		}
	}
	return w.b
}

func flags(bs ...bool) uint64 {
	var f uint64
	for i, b := range bs {
		if b {
			f |= 1 << i
		}
	}
	return f
}

// errSnapshotVersion marks a snapshot of another format.
var errSnapshotVersion = errors.New("snapshot of another version")

// decodeSnapshot parses a snapshot's binary form.
func decodeSnapshot(b []byte) (snap *partSnapshot, err error) {
	r := dec{b: b}
	defer func() {
		if e := recover(); e != nil {
			snap, err = nil, fmt.Errorf("snapshot is malformed: %v", e)
		}
	}()
	if v := r.uvarint(); v != snapshotVersion {
		return nil, fmt.Errorf("%w: version %d, this build reads %d", errSnapshotVersion, v, snapshotVersion)
	}
	snap = &partSnapshot{Partition: int32(r.varint()), Covered: r.varint(), Last: uint32(r.uvarint())}
	snap.Gens = r.names()
	snap.Removed = r.names()
	n := r.count()
	snap.Streams = make([]streamSnap, n)
	for i := range snap.Streams {
		s := &snap.Streams[i]
		s.Name, s.ContentType, s.ForkedFrom, s.ForkOffset = r.str(), r.str(), r.str(), r.str()
		s.Gen, s.TTL, s.ForkPos, s.ForkSub = r.varint(), r.varint(), r.varint(), r.varint()
		if at := r.varint(); at != math.MinInt64 {
			s.ExpiresAt = time.Unix(0, at).UTC()
		}
		s.Source = int(r.varint())
		if s.Source >= i {
			panic("a fork before its source")
		}
		s.NextRec, s.Burnt = r.varint(), r.varint()
		np := r.count()
		s.Producers = make(map[string]fence.State, np)
		for j := 0; j < np; j++ {
			id := r.str()
			s.Producers[id] = fence.State{Known: r.bool(), Epoch: r.varint(), LastSeq: r.varint()}
		}
		s.StreamSeq = r.str()
		if r.bool() {
			s.Closer = &producerTuple{id: r.str(), epoch: r.varint(), seq: r.varint()}
		}
		f := r.uvarint()
		s.Trimmed, s.Closed, s.Deleted, s.Soft, s.Current = f&1 != 0, f&2 != 0, f&4 != 0, f&8 != 0, f&16 != 0
		s.Refs = int(r.varint())
		s.CreateKoff, s.Tail, s.Own = r.varint(), r.varint(), int(r.varint())
		ne := r.count()
		s.Entries = make([]entry, ne)
		k, rec := int64(0), int64(0)
		for j := range s.Entries {
			k += r.varint()
			rec += r.varint()
			s.Entries[j] = entry{koff: k, rec: rec, cut: int32(r.varint())}
		}
		if s.Own < 0 || s.Own > ne {
			panic("own entries out of range")
		}
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("snapshot is malformed: %d bytes after its end", len(r.b))
	}
	return snap, nil
}

// enc and dec are the snapshot's varint coding.
type enc struct{ b []byte }

func (w *enc) uvarint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *enc) varint(v int64)   { w.b = binary.AppendVarint(w.b, v) }
func (w *enc) str(s string)     { w.uvarint(uint64(len(s))); w.b = append(w.b, s...) }
func (w *enc) bool(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}
func (w *enc) names(m map[string]int64) {
	w.uvarint(uint64(len(m)))
	for name, g := range m {
		w.str(name)
		w.varint(g)
	}
}

type dec struct{ b []byte }

func (r *dec) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		panic("truncated")
	}
	r.b = r.b[n:]
	return v
}

func (r *dec) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		panic("truncated")
	}
	r.b = r.b[n:]
	return v
}

// count reads a length that must fit in what is left.
func (r *dec) count() int {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		panic("count beyond the data")
	}
	return int(n)
}

func (r *dec) str() string {
	n := r.count()
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *dec) bool() bool {
	if len(r.b) == 0 {
		panic("truncated")
	}
	v := r.b[0]
	r.b = r.b[1:]
	if v > 1 {
		panic("not a boolean")
	}
	return v == 1
}

func (r *dec) names() map[string]int64 {
	n := r.count()
	m := make(map[string]int64, n)
	for i := 0; i < n; i++ {
		name := r.str()
		m[name] = r.varint()
	}
	return m
}
