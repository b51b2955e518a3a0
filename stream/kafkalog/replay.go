package kafkalog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// Replay folds the records of one partition of the data topic, in offset
// order, into the streams they describe, with the rules of the log
// service's own rebuild (rebuild.go, create.go, delete.go): generations,
// the second copy of a Writer-retried record, creates that retention
// removed, forks and their inherited records, soft and hard deletes. A
// program that reads the topic directly (forklab log sink) sees through
// it exactly the streams, and the messages in them, that the HTTP API
// serves.
//
// It is a pure state machine: Apply takes one record and says what became
// readable; fetching, and what to do with the messages, are the caller's.
// Its state is a value (MarshalBinary, UnmarshalReplay), so a caller can
// commit it together with its own progress and resume after a crash exactly
// where it was.
type Replay struct {
	part    int32
	streams map[string]*rstream
	gens    map[string]int64 // highest generation seen per name
	removed map[string]int64 // highest generation deleted per name
}

// Entry is one record of a stream's view, as the service indexes it: the
// stream's own records and, for a fork, the records it inherits from its
// source.
type Entry struct {
	// Koff is the Kafka offset of the record that holds the bytes (its
	// later copy, if a Writer retry wrote it twice).
	Koff int64
	// Rec is the record's number in the generation that wrote it.
	Rec int64
	// Cut is -1 for the whole record; else the bytes of its value (of a
	// JSON array's inner text) that the view holds: the record a fork at a
	// sub-offset inherits in part. Messages(value, Cut) gives its messages.
	Cut int32
	// Msgs is how many messages the entry contributes to a JSON stream (1
	// for other streams).
	Msgs int32
}

// rstream is one stream generation in a Replay.
type rstream struct {
	name        string
	gen         int64
	contentType string
	json        bool
	nextRec     int64
	closed      bool
	deleted     bool
	soft        bool
	trimmed     bool
	refs        int
	source      *rstream
	entries     []Entry
	own         int   // index of the first entry the stream wrote itself
	createKoff  int64 // -1 when trimmed away
	tail        int64
	msgs        int64 // messages in entries
}

// NewReplay returns the empty state of partition part: what a reader of the
// partition knows before its first record.
func NewReplay(part int32) *Replay {
	return &Replay{part: part, streams: map[string]*rstream{}, gens: map[string]int64{}, removed: map[string]int64{}}
}

// Partition is the partition the Replay folds.
func (p *Replay) Partition() int32 { return p.part }

// StreamRef names one generation of a stream.
type StreamRef struct {
	Name string
	Gen  int64
}

// Change is what one record did.
type Change struct {
	// Stream and Gen are the stream generation the record belongs to, as
	// the service decided; ContentType and JSON describe it.
	Stream      string
	Gen         int64
	ContentType string
	JSON        bool
	// Applied is false for a record the service ignores: of an older or a
	// deleted generation, a second delete, a record of a stream it never
	// saw created that cannot be adopted. Duplicate marks the second copy
	// of a record a Writer retry wrote twice: applied, nothing new.
	Applied, Duplicate bool
	// Created: the record created this generation. Adopted: a record of a
	// generation whose create retention removed; the stream goes on from
	// it (its earlier messages are unknown).
	Created, Adopted bool
	// Index is the stream's message count before New: the position, from
	// 0, of New's first message in a read of the stream.
	Index int64
	// New are the entries that became readable, in the order a read
	// returns them: for a fork, the Inherited entries of its source first,
	// then the record's own (Own tells; its messages are in the record).
	New       []Entry
	Inherited int
	Own       bool
	// SourceMissing: the record creates a fork whose source generation is
	// not in this partition's state; the service gives it nothing to
	// inherit, and so does Replay.
	SourceMissing bool
	// Missing counts records of this generation that are absent before
	// this one (their numbers were skipped): removed by retention or lost.
	Missing int64
	// Closed: the stream is closed after this record.
	Closed bool
	// Removed lists the generations a delete removed for good: the stream
	// itself unless forks still inherit from it (then it is soft-deleted),
	// and soft-deleted sources whose last fork it was.
	Removed []StreamRef
	// SoftDeleted: the stream is deleted but kept for the forks that
	// inherit from it.
	SoftDeleted bool
}

// Apply folds one record of the partition. Records must come in offset
// order and belong to the Replay's partition.
func (p *Replay) Apply(rec Record) Change {
	r, koff := &rec.r, rec.Offset
	ch := Change{Stream: r.stream, Gen: r.gen, ContentType: r.contentType, JSON: isJSON(r.contentType)}
	if r.op == opCreate {
		p.applyCreate(r, koff, &ch)
		return ch
	}
	s := p.streams[r.stream]
	if s == nil || s.gen != r.gen {
		if s == nil && r.op != opDelete && p.adoptable(r.stream, r.gen) {
			s = p.adoptTrimmed(r)
			ch.Adopted = true
		} else {
			return ch
		}
	}
	ch.Applied = true
	ch.ContentType, ch.JSON = s.contentType, s.json
	if r.rec < s.nextRec {
		s.moveDuplicate(r.rec, koff)
		ch.Duplicate = true
		ch.Index, ch.Closed = s.msgs, s.closed
		return ch
	}
	if r.rec > s.nextRec && !ch.Adopted {
		ch.Missing = r.rec - s.nextRec
	}
	switch r.op {
	case opAppend, opClose:
		s.nextRec = r.rec + 1
		if r.closed {
			s.closed = true
		}
		ch.Index = s.msgs
		if len(r.value) > 0 {
			e := Entry{Koff: koff, Rec: r.rec, Cut: -1, Msgs: msgCount(s.json, r.value, -1)}
			s.entries = append(s.entries, e)
			s.tail = koff + 1
			s.msgs += int64(e.Msgs)
			ch.New, ch.Own = []Entry{e}, true
		}
		ch.Closed = s.closed
	case opDelete:
		s.nextRec = r.rec + 1
		ch.Index, ch.Closed = s.msgs, s.closed
		ch.Removed = p.applyDelete(s)
		ch.SoftDeleted = s.soft
	}
	return ch
}

// msgCount is how many messages a record contributes to a read.
func msgCount(json bool, value []byte, cut int32) int32 {
	if !json {
		return 1
	}
	if _, ok := oneMessage(value, cut); ok {
		return 1
	}
	inner := jsonInner(value)
	if cut >= 0 && int(cut) <= len(inner) {
		inner = inner[:cut]
	}
	return int32(len(jsonEnds(inner)))
}

func (p *Replay) applyCreate(r *record, koff int64, ch *Change) {
	existing := p.streams[r.stream]
	if existing != nil && existing.gen == r.gen {
		existing.moveDuplicate(0, koff)
		ch.Applied, ch.Duplicate = true, true
		ch.ContentType, ch.JSON = existing.contentType, existing.json
		ch.Index, ch.Closed = existing.msgs, existing.closed
		return
	}
	if (existing != nil && existing.gen > r.gen) || r.gen <= p.removed[r.stream] {
		return
	}
	s := &rstream{name: r.stream, gen: r.gen, contentType: r.contentType, json: isJSON(r.contentType),
		nextRec: 1, closed: r.closed, createKoff: koff}
	ch.Applied, ch.Created = true, true
	if r.forkedFrom != "" {
		src := p.streams[r.forkedFrom]
		if src == nil || src.gen != r.forkGen {
			ch.SourceMissing = true
			src = nil
		}
		s.source = src
		if src != nil {
			pos := src.tail
			// The fork point as the log's start reads it (create.go).
			if off, err := ParseOffset(r.forkOffset); err == nil {
				pos = off.Pos
				if off.IsZero() {
					pos = -1
				}
			}
			i := firstEntryAtOrAfter(src.entries, pos)
			s.entries = append(make([]Entry, 0, i+2), src.entries[:i]...)
			if r.forkCut >= 0 && i < len(src.entries) && src.entries[i].Koff == r.forkCutKoff {
				e := src.entries[i]
				e.Cut = int32(r.forkCut)
				e.Msgs = 1
				if s.json {
					// For a JSON stream the sub-offset counts messages
					// (§4.2), and the cut ends the last of them.
					e.Msgs = int32(r.forkSub)
				}
				s.entries = append(s.entries, e)
			}
			for _, e := range s.entries {
				s.msgs += int64(e.Msgs)
			}
			src.refs++
		}
	}
	s.own = len(s.entries)
	ch.New, ch.Inherited = s.entries, len(s.entries)
	if len(r.value) > 0 {
		e := Entry{Koff: koff, Rec: 0, Cut: -1, Msgs: msgCount(s.json, r.value, -1)}
		s.entries = append(s.entries, e)
		s.msgs += int64(e.Msgs)
		ch.New, ch.Own = s.entries, true
	}
	ch.New = ch.New[:len(ch.New):len(ch.New)]
	s.tail = koff + 1
	p.streams[r.stream] = s
	if r.gen > p.gens[r.stream] {
		p.gens[r.stream] = r.gen
	}
	ch.Closed = s.closed
}

// firstEntryAtOrAfter is firstAtOrAfter for Entry slices.
func firstEntryAtOrAfter(es []Entry, pos int64) int {
	return sort.Search(len(es), func(i int) bool { return es[i].Koff >= pos })
}

// adoptable is Log.adoptable: a record of a stream not in the state starts
// a stream whose create was trimmed away when its generation is at least as
// new as any seen and not one that was deleted.
func (p *Replay) adoptable(name string, gen int64) bool {
	return gen >= p.gens[name] && gen > p.removed[name]
}

func (p *Replay) adoptTrimmed(r *record) *rstream {
	s := &rstream{name: r.stream, gen: r.gen, contentType: r.contentType, json: isJSON(r.contentType),
		nextRec: r.rec, createKoff: -1, trimmed: true}
	p.streams[r.stream] = s
	if r.gen > p.gens[r.stream] {
		p.gens[r.stream] = r.gen
	}
	return s
}

// moveDuplicate is stream.moveDuplicate: the later copy of record rec is the
// one the service reads.
func (s *rstream) moveDuplicate(rec, koff int64) {
	if rec == 0 && koff > s.createKoff {
		s.createKoff = koff
	}
	for i := len(s.entries) - 1; i >= s.own; i-- {
		e := &s.entries[i]
		if e.Rec < rec {
			break
		}
		if e.Rec == rec && koff > e.Koff {
			e.Koff = koff
		}
	}
	s.tail = s.createKoff + 1
	if n := len(s.entries); n > 0 && s.entries[n-1].Koff+1 > s.tail {
		s.tail = s.entries[n-1].Koff + 1
	}
}

// applyDelete is Log.applyDelete; it returns the generations removed.
func (p *Replay) applyDelete(s *rstream) []StreamRef {
	s.deleted = true
	if s.refs > 0 {
		s.soft = true
		return nil
	}
	var out []StreamRef
	for s != nil {
		s.deleted, s.soft = true, false
		if p.streams[s.name] == s {
			delete(p.streams, s.name)
		}
		if s.gen > p.removed[s.name] {
			p.removed[s.name] = s.gen
		}
		out = append(out, StreamRef{s.name, s.gen})
		src := s.source
		s = nil
		if src != nil {
			src.refs--
			if src.soft && src.refs == 0 {
				s = src
			}
		}
	}
	return out
}

// Stream describes one live stream generation of a Replay.
type Stream struct {
	Name        string
	Gen         int64
	ContentType string
	Closed      bool
	// SoftDeleted: deleted, kept for the forks that inherit from it.
	SoftDeleted bool
	// Trimmed: its create record was removed by retention.
	Trimmed bool
	// Messages is how many messages a read of the whole stream returns.
	Messages int64
	// Entries is the stream's view: the records a read returns, in order.
	// The slice is the Replay's; do not modify it.
	Entries []Entry
}

// Streams lists the streams the partition holds, soft-deleted ones
// included, sorted by name.
func (p *Replay) Streams() []Stream {
	out := make([]Stream, 0, len(p.streams))
	for _, s := range p.streams {
		out = append(out, Stream{Name: s.name, Gen: s.gen, ContentType: s.contentType, Closed: s.closed,
			SoftDeleted: s.soft, Trimmed: s.trimmed, Messages: s.msgs, Entries: s.entries})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Len is the number of stream generations the state holds (soft-deleted
// sources included).
func (p *Replay) Len() int { return len(p.all()) }

// all lists every stream generation reachable from the state: the streams
// by name and the soft-deleted sources forks still reference, sources
// first, in a deterministic order.
func (p *Replay) all() []*rstream {
	names := make([]string, 0, len(p.streams))
	for n := range p.streams {
		names = append(names, n)
	}
	sort.Strings(names)
	seen := map[*rstream]bool{}
	var out []*rstream
	var visit func(s *rstream)
	visit = func(s *rstream) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		visit(s.source)
		out = append(out, s)
	}
	for _, n := range names {
		visit(p.streams[n])
	}
	return out
}

// replayVersion is the layout of MarshalBinary's output.
const replayVersion = 1

// MarshalBinary encodes the state: the streams of the partition with their
// entries (varints, offsets as deltas), the generations seen and deleted.
// UnmarshalReplay decodes it.
func (p *Replay) MarshalBinary() ([]byte, error) {
	all := p.all()
	idx := make(map[*rstream]int, len(all))
	for i, s := range all {
		idx[s] = i
	}
	var b []byte
	b = binary.AppendUvarint(b, replayVersion)
	b = binary.AppendVarint(b, int64(p.part))
	b = binary.AppendUvarint(b, uint64(len(all)))
	for _, s := range all {
		b = appendString(b, s.name)
		b = binary.AppendVarint(b, s.gen)
		b = appendString(b, s.contentType)
		var flags uint64
		for i, f := range []bool{s.closed, s.deleted, s.soft, s.trimmed, p.streams[s.name] == s} {
			if f {
				flags |= 1 << i
			}
		}
		b = binary.AppendUvarint(b, flags)
		b = binary.AppendVarint(b, s.nextRec)
		b = binary.AppendVarint(b, int64(s.refs))
		src := -1
		if s.source != nil {
			src = idx[s.source]
		}
		b = binary.AppendVarint(b, int64(src))
		b = binary.AppendVarint(b, s.createKoff)
		b = binary.AppendVarint(b, s.tail)
		b = binary.AppendUvarint(b, uint64(s.own))
		b = binary.AppendUvarint(b, uint64(len(s.entries)))
		prev := int64(0)
		for _, e := range s.entries {
			b = binary.AppendVarint(b, e.Koff-prev)
			prev = e.Koff
			b = binary.AppendVarint(b, e.Rec)
			b = binary.AppendVarint(b, int64(e.Cut))
			b = binary.AppendVarint(b, int64(e.Msgs))
		}
	}
	for _, m := range []map[string]int64{p.gens, p.removed} {
		names := make([]string, 0, len(m))
		for n := range m {
			names = append(names, n)
		}
		sort.Strings(names)
		b = binary.AppendUvarint(b, uint64(len(names)))
		for _, n := range names {
			b = appendString(b, n)
			b = binary.AppendVarint(b, m[n])
		}
	}
	return b, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// errReplayState is wrapped by UnmarshalReplay's errors.
var errReplayState = errors.New("corrupt replay state")

// UnmarshalReplay decodes a state MarshalBinary encoded.
func UnmarshalReplay(b []byte) (*Replay, error) {
	d := decoder{b: b}
	if v := d.uvarint(); v != replayVersion && d.err == nil {
		return nil, fmt.Errorf("%w: layout version %d, want %d", errReplayState, v, replayVersion)
	}
	p := NewReplay(int32(d.varint()))
	n := d.uvarint()
	if n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: %d streams in %d bytes", errReplayState, n, len(b))
	}
	all := make([]*rstream, 0, n)
	for i := uint64(0); i < n && d.err == nil; i++ {
		s := &rstream{name: d.string(), gen: d.varint(), contentType: d.string()}
		s.json = isJSON(s.contentType)
		flags := d.uvarint()
		s.closed, s.deleted, s.soft, s.trimmed = flags&1 != 0, flags&2 != 0, flags&4 != 0, flags&8 != 0
		s.nextRec = d.varint()
		s.refs = int(d.varint())
		if src := d.varint(); src >= 0 {
			if src >= int64(len(all)) {
				return nil, fmt.Errorf("%w: stream %q refers to a later source", errReplayState, s.name)
			}
			s.source = all[src]
		}
		s.createKoff = d.varint()
		s.tail = d.varint()
		s.own = int(d.uvarint())
		ne := d.uvarint()
		if ne > uint64(len(b)) {
			return nil, fmt.Errorf("%w: %d entries in %d bytes", errReplayState, ne, len(b))
		}
		s.entries = make([]Entry, 0, ne)
		prev := int64(0)
		for j := uint64(0); j < ne && d.err == nil; j++ {
			e := Entry{Koff: prev + d.varint(), Rec: d.varint(), Cut: int32(d.varint()), Msgs: int32(d.varint())}
			prev = e.Koff
			s.entries = append(s.entries, e)
			s.msgs += int64(e.Msgs)
		}
		all = append(all, s)
		if flags&16 != 0 {
			p.streams[s.name] = s
		}
	}
	for _, m := range []map[string]int64{p.gens, p.removed} {
		k := d.uvarint()
		for i := uint64(0); i < k && d.err == nil; i++ {
			m[d.string()] = d.varint()
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d bytes left over", len(d.b))
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: %v", errReplayState, d.err)
	}
	return p, nil
}

// decoder reads the varint layout of MarshalBinary; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errors.New("truncated")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errors.New("truncated")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.err = errors.New("truncated")
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
