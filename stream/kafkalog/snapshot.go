package kafkalog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
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
// A full snapshot holds everything; a delta holds what changed since the
// snapshot before it (the base or the previous delta): the streams whose
// state changed, their index only from where the previous one ended unless
// it was rewritten (a record copy moved an entry), the streams removed, the
// names whose generations moved. A chain is a full snapshot and the deltas
// after it; it is rewritten as a new full snapshot once its deltas weigh
// as much as its base, so that what is written stays proportional to the
// state while the records to replay on start stay few.
//
// The encoding is binary, versioned by snapshotVersion: a snapshot of
// another version is ignored (a full rebuild runs).

// snapshotVersion is the snapshot format; bump it when the state changes.
const snapshotVersion = 2

// skey names one stream generation.
type skey struct {
	name string
	gen  int64
}

// partSnapshot is the state of one partition, captured on its goroutine:
// a full snapshot, or a delta (Delta) over the one before it.
type partSnapshot struct {
	Partition int32
	Delta     bool
	Covered   int64 // the state is the fold of the records below this offset
	// Last identifies the record at Covered-1 (its key and headers), so
	// that a snapshot of a topic that was deleted and created again, or
	// truncated, is not taken for this one; 0 when Covered is 0.
	Last    uint32
	Streams []streamSnap
	Dropped []skey           // delta: stream generations removed since the one before
	Gens    map[string]int64 // highest generation created per name, from this partition's records (delta: the names that moved)
	Removed map[string]int64 // highest generation deleted per name (delta: the names that moved)

	chain *manifest // the manifest it was read through
}

// streamSnap is one stream generation's state.
type streamSnap struct {
	Name, ContentType, ForkedFrom, ForkOffset string
	Gen, TTL, ForkPos, ForkSub                int64
	ExpiresAt                                 time.Time
	Source                                    skey // the stream it inherits from; Gen 0 for none
	Trimmed                                   bool // its create record fell out of retention
	Current                                   bool // the stream its name resolves to (not only a fork's source)
	// Appended (delta only): Entries continue the entries of the snapshot
	// before, rather than replace them.
	Appended bool

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

// snapMark is what the last written snapshot held of a stream, to tell
// what a delta must carry.
type snapMark struct {
	entries  int    // len(entries)
	rewrites int    // the stream's rewrite count (moveDuplicate)
	sum      uint64 // fingerprint of the rest of its state
}

// snapMarks is what the last written snapshot of a partition held.
type snapMarks struct {
	streams map[*stream]snapMark
	gens    map[string]int64
	removed map[string]int64
}

// capture snapshots partition p's state: in full, or (prev != nil) as a
// delta over the snapshot prev describes. It runs on p's goroutine (or
// before it starts), between batches, so the write state is the fold of
// Kafka's records below p.next. It returns the snapshot and what it holds,
// to describe it to the next delta once it is written.
func (l *Log) capture(p *partition, prev *snapMarks) (*partSnapshot, *snapMarks) {
	snap := &partSnapshot{Partition: p.id, Delta: prev != nil, Covered: p.next, Last: p.lastRecord,
		Gens: map[string]int64{}, Removed: map[string]int64{}}
	marks := &snapMarks{streams: map[*stream]snapMark{}, gens: map[string]int64{}, removed: map[string]int64{}}
	l.mu.RLock()
	var roots []*stream
	for _, s := range l.streams {
		if s.meta.part == p.id {
			roots = append(roots, s)
		}
	}
	for name, g := range p.gens {
		marks.gens[name] = g
		if prev == nil || prev.gens[name] != g {
			snap.Gens[name] = g
		}
	}
	for name, g := range p.removed {
		marks.removed[name] = g
		if prev == nil || prev.removed[name] != g {
			snap.Removed[name] = g
		}
	}
	l.mu.RUnlock()
	current := map[*stream]bool{}
	for _, s := range roots {
		current[s] = true
	}
	// Sources before the forks that inherit from them.
	var add func(s *stream)
	add = func(s *stream) {
		if _, ok := marks.streams[s]; ok {
			return
		}
		if s.meta.source != nil {
			add(s.meta.source)
		}
		v := s.snapshot()
		ss := streamSnap{
			Name: s.meta.name, ContentType: s.meta.contentType, ForkedFrom: s.meta.forkedFrom, ForkOffset: s.meta.forkOffset,
			Gen: s.meta.gen, TTL: s.meta.ttl, ForkPos: s.meta.forkPos, ForkSub: s.meta.forkSub, ExpiresAt: s.meta.expiresAt,
			Trimmed: s.meta.trimmed, Current: current[s],
			NextRec: s.w.nextRec, Burnt: s.w.burnt, Producers: maps.Clone(s.w.producers), StreamSeq: s.w.streamSeq, Closed: s.w.closed,
			Closer: s.w.closer, Deleted: s.w.deleted, Soft: s.w.soft, Refs: s.w.refs,
			Entries: v.entries, CreateKoff: v.createKoff, Tail: v.tail,
		}
		if src := s.meta.source; src != nil {
			ss.Source = skey{src.meta.name, src.meta.gen}
		}
		s.mu.RLock()
		ss.Own = s.own
		m := snapMark{entries: len(v.entries), rewrites: s.rewrites}
		s.mu.RUnlock()
		m.sum = ss.sum()
		marks.streams[s] = m
		if prev != nil {
			old, ok := prev.streams[s]
			switch {
			case !ok || old.rewrites != m.rewrites || old.entries > m.entries:
				// New, or its index rewritten: all of it.
			case old.sum == m.sum && old.entries == m.entries:
				return // unchanged
			default:
				ss.Appended, ss.Entries = true, v.entries[old.entries:]
			}
		}
		snap.Streams = append(snap.Streams, ss)
	}
	for _, s := range roots {
		add(s)
	}
	if prev != nil {
		for s := range prev.streams {
			if _, ok := marks.streams[s]; !ok {
				snap.Dropped = append(snap.Dropped, skey{s.meta.name, s.meta.gen})
			}
		}
	}
	return snap, marks
}

// sum fingerprints a stream's state but its index, to tell a changed
// stream from an unchanged one.
func (ss *streamSnap) sum() uint64 {
	h := fnv.New64a()
	var w enc
	w.varint(ss.NextRec)
	w.varint(ss.Burnt)
	w.str(ss.StreamSeq)
	w.uvarint(flags(ss.Trimmed, ss.Closed, ss.Deleted, ss.Soft, ss.Current))
	w.varint(int64(ss.Refs))
	w.varint(ss.CreateKoff)
	w.varint(ss.Tail)
	w.varint(int64(ss.Own))
	if ss.Closer != nil {
		w.str(ss.Closer.id)
		w.varint(ss.Closer.epoch)
		w.varint(ss.Closer.seq)
	}
	h.Write(w.b)
	// The producers in any order: a sum of their hashes.
	var ps uint64
	for id, st := range ss.Producers {
		ph := fnv.New64a()
		var pw enc
		pw.str(id)
		pw.bool(st.Known)
		pw.varint(st.Epoch)
		pw.varint(st.LastSeq)
		ph.Write(pw.b)
		ps += ph.Sum64()
	}
	return h.Sum64() ^ ps
}

// merge applies a delta to the full snapshot base (in place) and returns
// it.
func merge(base, delta *partSnapshot) (*partSnapshot, error) {
	if delta.Partition != base.Partition || delta.Covered < base.Covered {
		return nil, fmt.Errorf("a delta of %d at %d does not follow a snapshot of %d at %d", delta.Partition, delta.Covered, base.Partition, base.Covered)
	}
	at := make(map[skey]int, len(base.Streams))
	for i, s := range base.Streams {
		at[skey{s.Name, s.Gen}] = i
	}
	// Check first, change after: a delta that does not apply leaves base
	// as it was.
	for _, d := range delta.Streams {
		if _, ok := at[skey{d.Name, d.Gen}]; d.Appended && !ok {
			return nil, fmt.Errorf("a delta continues stream %q generation %d, which the snapshot before does not hold", d.Name, d.Gen)
		}
	}
	for _, d := range delta.Streams {
		k := skey{d.Name, d.Gen}
		i, ok := at[k]
		if d.Appended {
			d.Entries = append(base.Streams[i].Entries, d.Entries...)
			d.Appended = false
		}
		if ok {
			base.Streams[i] = d
		} else {
			at[k] = len(base.Streams)
			base.Streams = append(base.Streams, d)
		}
	}
	if len(delta.Dropped) > 0 {
		drop := map[skey]bool{}
		for _, k := range delta.Dropped {
			drop[k] = true
		}
		kept := base.Streams[:0]
		for _, s := range base.Streams {
			if !drop[skey{s.Name, s.Gen}] {
				kept = append(kept, s)
			}
		}
		base.Streams = kept
	}
	for name, g := range delta.Gens {
		base.Gens[name] = g
	}
	for name, g := range delta.Removed {
		base.Removed[name] = g
	}
	base.Covered, base.Last = delta.Covered, delta.Last
	return base, nil
}

// install makes the streams of a loaded (full) snapshot the state of
// partition p. It runs before p's goroutine starts.
func (l *Log) install(p *partition, snap *partSnapshot) error {
	byKey := make(map[skey]*streamSnap, len(snap.Streams))
	for i := range snap.Streams {
		ss := &snap.Streams[i]
		byKey[skey{ss.Name, ss.Gen}] = ss
	}
	made := make(map[skey]*stream, len(snap.Streams))
	l.mu.Lock()
	defer l.mu.Unlock()
	var make1 func(ss *streamSnap, depth int) (*stream, error)
	make1 = func(ss *streamSnap, depth int) (*stream, error) {
		k := skey{ss.Name, ss.Gen}
		if s, ok := made[k]; ok {
			return s, nil
		}
		if depth > len(snap.Streams) {
			return nil, errors.New("snapshot has a cycle of forks")
		}
		m := meta{name: ss.Name, gen: ss.Gen, part: p.id, contentType: ss.ContentType, json: isJSON(ss.ContentType),
			ttl: ss.TTL, expiresAt: ss.ExpiresAt, forkedFrom: ss.ForkedFrom, forkOffset: ss.ForkOffset, forkPos: ss.ForkPos,
			forkSub: ss.ForkSub, trimmed: ss.Trimmed}
		if ss.Source.gen != 0 {
			src := byKey[ss.Source]
			if src == nil {
				return nil, fmt.Errorf("stream %q inherits from %q generation %d, which the snapshot does not hold", ss.Name, ss.Source.name, ss.Source.gen)
			}
			var err error
			if m.source, err = make1(src, depth+1); err != nil {
				return nil, err
			}
		}
		s := newStream(m)
		s.w = wstate{nextRec: ss.NextRec, burnt: ss.Burnt, producers: ss.Producers, streamSeq: ss.StreamSeq, closed: ss.Closed,
			closer: ss.Closer, deleted: ss.Deleted, soft: ss.Soft, refs: ss.Refs}
		if s.w.producers == nil {
			s.w.producers = map[string]fence.State{}
		}
		s.entries, s.own, s.createKoff, s.tail = ss.Entries, ss.Own, ss.CreateKoff, ss.Tail
		s.closed, s.soft = ss.Closed, ss.Soft
		s.producers = maps.Clone(s.w.producers)
		made[k] = s
		return s, nil
	}
	for i := range snap.Streams {
		ss := &snap.Streams[i]
		s, err := make1(ss, 0)
		if err != nil {
			return err
		}
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
	p.restored, p.covered, p.chain = true, snap.Covered, snap.chain
	return nil
}

// encode renders a snapshot in its binary form.
func (snap *partSnapshot) encode() []byte {
	var w enc
	w.uvarint(snapshotVersion)
	w.varint(int64(snap.Partition))
	w.bool(snap.Delta)
	w.varint(snap.Covered)
	w.uvarint(uint64(snap.Last))
	w.names(snap.Gens)
	w.names(snap.Removed)
	w.uvarint(uint64(len(snap.Dropped)))
	for _, k := range snap.Dropped {
		w.str(k.name)
		w.varint(k.gen)
	}
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
		w.str(s.Source.name)
		w.varint(s.Source.gen)
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
		w.uvarint(flags(s.Trimmed, s.Closed, s.Deleted, s.Soft, s.Current, s.Appended))
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
	snap = &partSnapshot{Partition: int32(r.varint()), Delta: r.bool(), Covered: r.varint(), Last: uint32(r.uvarint())}
	snap.Gens = r.names()
	snap.Removed = r.names()
	if nd := r.count(); nd > 0 {
		snap.Dropped = make([]skey, nd)
		for i := range snap.Dropped {
			snap.Dropped[i] = skey{r.str(), r.varint()}
		}
	}
	n := r.count()
	snap.Streams = make([]streamSnap, n)
	for i := range snap.Streams {
		s := &snap.Streams[i]
		s.Name, s.ContentType, s.ForkedFrom, s.ForkOffset = r.str(), r.str(), r.str(), r.str()
		s.Gen, s.TTL, s.ForkPos, s.ForkSub = r.varint(), r.varint(), r.varint(), r.varint()
		if at := r.varint(); at != math.MinInt64 {
			s.ExpiresAt = time.Unix(0, at).UTC()
		}
		s.Source = skey{r.str(), r.varint()}
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
		s.Trimmed, s.Closed, s.Deleted, s.Soft, s.Current, s.Appended = f&1 != 0, f&2 != 0, f&4 != 0, f&8 != 0, f&16 != 0, f&32 != 0
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
