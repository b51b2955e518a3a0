package kafkalog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/forklab/forklab/stream/fence"
)

// Replay folds the records of one partition of the data topic, in offset
// order, into the streams they describe, with the rules of the log
// service's own start (rebuild.go, create.go, delete.go): generations, the
// record numbers that tell a copy of a record (or a late write whose number
// was passed) from a new one, the rules that refuse an append or close that
// landed late (wstate.fold, shared with the service), creates that
// retention removed, forks and their inherited records, soft and hard
// deletes. A program that reads the topic directly (forklab log sink) sees
// through it exactly the streams, the messages in them and the offsets
// that the HTTP API serves, as a restart of the service would.
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
	// gapEnd is the last offset of the latest range retention removed
	// before it was read (Gap); -1 when none.
	gapEnd int64
}

// Entry is one record of a stream's view, as the service indexes it: the
// stream's own records and, for a fork, the records it inherits from its
// source.
type Entry struct {
	// Koff is the Kafka offset of the record that holds the bytes (its
	// later copy, if Kafka holds the stream's latest record twice).
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
	part        int32
	contentType string
	json        bool
	// w is the write state the fold decides by, as the service keeps it
	// (nextRec, producers, Stream-Seq, closed, deleted, soft, refs); burnt
	// and closer, which only the live path uses, stay empty.
	w          wstate
	trimmed    bool
	source     *rstream
	forkPos    int64 // positions up to it are the source's; -1 for Zero or no source
	entries    []Entry
	own        int   // index of the first entry the stream wrote itself
	createKoff int64 // -1 when trimmed away
	tail       int64
	msgs       int64 // messages in entries
	last       int64 // Kafka offset of the last record that took a number of the generation
}

func (s *rstream) stamper() (string, int64, int32) { return s.name, s.gen, s.part }
func (s *rstream) inherits() (*rstream, int64, bool) {
	return s.source, s.forkPos, s.source != nil
}

// mint is the offset the service issues for position pos of s (mintIn).
func (s *rstream) mint(pos int64) Offset { return mintIn(s, pos) }

// NewReplay returns the empty state of partition part: what a reader of the
// partition knows before its first record.
func NewReplay(part int32) *Replay {
	return &Replay{part: part, streams: map[string]*rstream{}, gens: map[string]int64{}, removed: map[string]int64{}, gapEnd: -1}
}

// Partition is the partition the Replay folds.
func (p *Replay) Partition() int32 { return p.part }

// StreamRef names one generation of a stream.
type StreamRef struct {
	Name string
	Gen  int64
}

// Why the fold refuses an append or close that landed late (Change.Refused):
// the rules the service decided later writes by, applied to the record in
// the order Kafka holds it (docs/session-log.md, "Writes, duplicates and
// crashes").
const (
	RefusedClosed     = "the stream is closed"
	RefusedDuplicate  = "the producer seq was already accepted"
	RefusedStaleEpoch = "the producer epoch is stale"
	RefusedStreamSeq  = "the Stream-Seq is not greater than the last one"
)

// Change is what one record did.
type Change struct {
	// Stream and Gen are the stream generation the record belongs to, as
	// the service decided; ContentType and JSON describe it.
	Stream      string
	Gen         int64
	ContentType string
	JSON        bool
	// Applied is false for a record the service passes over: of an older
	// or a deleted generation, a second delete, a record of a stream it
	// never saw created that cannot be adopted. An applied record belongs
	// to the stream generation; Duplicate and Refused mark the ones that
	// add nothing to it.
	Applied bool
	// Duplicate marks a record whose number the fold has passed: a second
	// copy of a record, or a write the service gave up on that landed
	// after its retry (or later writes) had been numbered. Nothing new;
	// a second copy of the stream's latest record moves its entry to the
	// later copy, as in the service.
	Duplicate bool
	// Refused names the rule by which the fold refuses an append or close
	// that landed after the stream moved on without it (RefusedClosed,
	// RefusedDuplicate, RefusedStaleEpoch, RefusedStreamSeq); "" when it
	// was taken. A refused record takes its number and adds nothing.
	Refused string
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
	// ReadFrom gives the offset to read each from.
	New       []Entry
	Inherited int
	Own       bool
	// SourceMissing: the record creates a fork whose source generation is
	// not in this partition's state; the service gives it nothing to
	// inherit, and so does Replay.
	SourceMissing bool
	// Missing counts record numbers of this generation skipped before this
	// record when a range of the partition that retention removed unread
	// (Gap) lies between it and the stream's previous record: records lost
	// to retention (a number burnt by a failed write in that span counts
	// too). Burnt counts the numbers skipped when no such range lies
	// between: writes the service gave up on, which never landed or land
	// later (then Duplicate). Neither counts for an Adopted record.
	Missing, Burnt int64
	// Closed: the stream is closed after this record.
	Closed bool
	// Tail is the stream's tail offset after the record, as the service
	// issues it (HEAD, and the Stream-Next-Offset of a read that reaches
	// the end); the zero Offset when the record was not Applied.
	Tail Offset
	// Removed lists the generations a delete removed for good: the stream
	// itself unless forks still inherit from it (then it is soft-deleted),
	// and soft-deleted sources whose last fork it was; and those that
	// ended with a Superseded generation.
	Removed []StreamRef
	// Superseded names the generation of the record's stream name that
	// the record, of a newer generation, ended (zero when none): the
	// Replay held it live — adopted after retention removed its create, or
	// created by a create that landed late — and nothing in this partition
	// deleted it. It is deleted as a delete record would delete it. Rows
	// of it a reader wrote are of a generation that was over; a generation
	// live in another partition's Replay is not seen here (CrossCheck).
	Superseded StreamRef
	// SoftDeleted: the stream is deleted but kept for the forks that
	// inherit from it.
	SoftDeleted bool

	s      *rstream
	prev   int64 // position right after the entry before New[0] in the view; -1 when none
	gapEnd int64 // the Replay's gapEnd when the record was applied
}

// ReadFrom is the offset to read the stream from to get New[i] first, as
// the service issues it: the offset right after the entry before it in the
// stream's view (the Stream-Next-Offset of a read that ended there), or
// Zero, the beginning, when New[i] is the view's first entry. For a fork,
// the offsets of the positions it inherits are its source's (§8: no offset
// translation), stamped as the service stamps them.
//
// Where that position lies in a range retention removed (Gap) — the entry
// before New[i] is gone, or New[i] is the first entry of a stream whose
// beginning is gone (an Adopted stream, or one created before the range)
// — a read from it would be refused (410 Gone: the service cannot return
// what lies between), so ReadFrom is the log start offset Gap was told
// instead: the first position a reader can read from, as a restarted
// service issues it (its Forklab-Earliest-Offset for a trimmed stream). A
// read from it starts with the first record of the view Kafka still holds.
func (c *Change) ReadFrom(i int) Offset {
	pos := c.prev
	if i > 0 {
		pos = c.New[i-1].Koff + 1
	}
	if c.gapEnd >= 0 && pos <= c.gapEnd && (pos >= 0 || c.lostBeginning()) {
		return c.s.mint(c.gapEnd + 1)
	}
	if pos < 0 {
		return Zero
	}
	return c.s.mint(pos)
}

// lostBeginning reports whether the beginning of the change's stream (of
// the lineage member whose range holds it: a fork at Zero starts with its
// source) lies in or before the range retention removed.
func (c *Change) lostBeginning() bool {
	m := c.s
	for m.source != nil && m.forkPos < 0 {
		m = m.source
	}
	return m.trimmed || m.createKoff <= c.gapEnd
}

// Gap tells the Replay that the records of its partition below logStart
// that it was not given were removed by retention before they were read
// (a Reader's RetentionError): record numbers that the next record of a
// stream skips across them are Missing, not Burnt.
func (p *Replay) Gap(logStart int64) {
	p.gapEnd = max(p.gapEnd, logStart-1)
}

// Apply folds one record of the partition. Records must come in offset
// order and belong to the Replay's partition.
func (p *Replay) Apply(rec Record) Change {
	r, koff := &rec.r, rec.Offset
	ch := Change{Stream: r.stream, Gen: r.gen, ContentType: r.contentType, JSON: isJSON(r.contentType), prev: -1, gapEnd: p.gapEnd}
	if r.op == opCreate {
		p.applyCreate(r, koff, &ch)
		return ch
	}
	s := p.streams[r.stream]
	if s == nil || s.gen != r.gen {
		if s != nil && r.gen > s.gen {
			// A record of a newer generation whose create retention
			// removed: the one in the state is over (Log.supersede).
			p.supersede(s, &ch)
			s = nil
		}
		if s == nil && r.op != opDelete && p.adoptable(r.stream, r.gen) {
			s = p.adoptTrimmed(r)
			ch.Adopted = true
		} else {
			if s == nil && r.op == opDelete && r.gen > p.removed[r.stream] {
				p.removed[r.stream] = r.gen // Log.noteRemoved
			}
			return ch
		}
	}
	ch.Applied, ch.s = true, s
	ch.ContentType, ch.JSON = s.contentType, s.json
	skipped, why := r.rec-s.w.nextRec, s.w.refusal(r)
	v := s.w.fold(r)
	if v == foldTaken || v == foldRefused {
		// The record took its number: the ones it skips were lost to
		// retention or burnt by writes that failed.
		if skipped > 0 && p.gapEnd > s.last {
			ch.Missing = skipped
		} else if skipped > 0 {
			ch.Burnt = skipped
		}
		s.last = koff
	}
	switch v {
	case foldCopy, foldCopyOfLatest:
		s.moveDuplicate(r.rec, koff, v == foldCopyOfLatest)
		ch.Duplicate = true
	case foldRefused:
		ch.Refused = why
	case foldTaken:
		if r.op == opDelete {
			ch.Removed = p.applyDelete(s)
			ch.SoftDeleted = s.w.soft
		} else if len(r.value) > 0 {
			e := Entry{Koff: koff, Rec: r.rec, Cut: -1, Msgs: msgCount(s.json, r.value, -1)}
			if n := len(s.entries); n > 0 {
				ch.prev = s.entries[n-1].Koff + 1
			}
			ch.Index = s.msgs
			s.entries = append(s.entries, e)
			s.tail = koff + 1
			s.msgs += int64(e.Msgs)
			ch.New, ch.Own = []Entry{e}, true
		}
	}
	if len(ch.New) == 0 {
		ch.Index = s.msgs
	}
	ch.Closed, ch.Tail = s.w.closed, s.mint(s.tail)
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

// applyCreate is Log.applyCreate and installCreate.
func (p *Replay) applyCreate(r *record, koff int64, ch *Change) {
	existing := p.streams[r.stream]
	if existing != nil && existing.gen == r.gen {
		existing.moveDuplicate(0, koff, existing.w.fold(r) == foldCopyOfLatest)
		ch.Applied, ch.Duplicate, ch.s = true, true, existing
		ch.ContentType, ch.JSON = existing.contentType, existing.json
		ch.Index, ch.Closed, ch.Tail = existing.msgs, existing.w.closed, existing.mint(existing.tail)
		return
	}
	if (existing != nil && existing.gen > r.gen) || r.gen <= p.removed[r.stream] {
		return
	}
	if existing != nil {
		p.supersede(existing, ch)
	}
	s := &rstream{name: r.stream, gen: r.gen, part: p.part, contentType: r.contentType, json: isJSON(r.contentType),
		w: wstate{nextRec: 1, closed: r.closed, producers: map[string]fence.State{}}, forkPos: -1, createKoff: koff, last: koff}
	ch.Applied, ch.Created, ch.s = true, true, s
	if r.forkedFrom != "" {
		src := p.streams[r.forkedFrom]
		if src == nil || src.gen != r.forkGen {
			ch.SourceMissing = true
			src = nil
		}
		s.source = src
		if src != nil {
			s.forkPos = forkPoint(r, src.tail)
			i := firstEntryAtOrAfter(src.entries, s.forkPos)
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
			src.w.refs++
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
	ch.Closed, ch.Tail = s.w.closed, s.mint(s.tail)
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

// adoptTrimmed is Log.adoptTrimmed.
func (p *Replay) adoptTrimmed(r *record) *rstream {
	s := &rstream{name: r.stream, gen: r.gen, part: p.part, contentType: r.contentType, json: isJSON(r.contentType),
		w: wstate{nextRec: r.rec, producers: map[string]fence.State{}}, forkPos: -1, createKoff: -1, trimmed: true, last: -1}
	p.streams[r.stream] = s
	if r.gen > p.gens[r.stream] {
		p.gens[r.stream] = r.gen
	}
	return s
}

// moveDuplicate is stream.moveDuplicate: a second copy of the stream's
// latest record (latest) is the one the service reads; a copy of an older
// record is ignored.
func (s *rstream) moveDuplicate(rec, koff int64, latest bool) {
	if !latest {
		return
	}
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

// supersede is Log.supersede: stream generation s, which a record of a
// newer generation of its name replaces, is deleted (unless it was), and
// ch says so (Superseded, Removed).
func (p *Replay) supersede(s *rstream, ch *Change) {
	if s.w.deleted {
		return
	}
	ch.Superseded = StreamRef{s.name, s.gen}
	ch.Removed = append(ch.Removed, p.applyDelete(s)...)
}

// applyDelete is Log.applyDelete; it returns the generations removed.
func (p *Replay) applyDelete(s *rstream) []StreamRef {
	s.w.deleted = true
	if s.w.refs > 0 {
		s.w.soft = true
		return nil
	}
	var out []StreamRef
	for s != nil {
		s.w.deleted, s.w.soft = true, false
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
			src.w.refs--
			if src.w.soft && src.w.refs == 0 {
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
	// Tail is the stream's tail offset as the service issues it (HEAD).
	Tail Offset

	s *rstream
}

// End is the offset right after Entries[i], as the service issues it: the
// Stream-Next-Offset of a read whose last record is Entries[i] (and the
// offset from which a read returns Entries[i+1] first).
func (s Stream) End(i int) Offset { return s.s.mint(s.Entries[i].Koff + 1) }

// Streams lists the streams the partition holds, soft-deleted ones
// included, sorted by name.
func (p *Replay) Streams() []Stream {
	out := make([]Stream, 0, len(p.streams))
	for _, s := range p.streams {
		out = append(out, Stream{Name: s.name, Gen: s.gen, ContentType: s.contentType, Closed: s.w.closed,
			SoftDeleted: s.w.soft, Trimmed: s.trimmed, Messages: s.msgs, Entries: s.entries, Tail: s.mint(s.tail), s: s})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// GenConflict is a stream name that the Replays of two partitions hold live
// in different generations. Only the newer one can be live: a name has one
// generation at a time, and a generation is created only after the one
// before it was deleted (or its create given up on). A Replay folds one
// partition and cannot see that the newer generation, in another
// partition, ended the older one: the older generation's delete is not in
// its partition (retention removed it with the create, or there is none:
// a create given up on that landed late), so the older one stays live
// there. The service, which folds every partition into one state, decides
// the newer (Log.supersede).
type GenConflict struct {
	// Name is the stream name.
	Name string
	// Gen and Partition are the older generation, which is over, and the
	// partition whose Replay holds it live; Adopted: it was adopted
	// (retention removed its create).
	Gen       int64
	Partition int32
	Adopted   bool
	// NewerGen and NewerPartition are the generation that replaced it.
	NewerGen       int64
	NewerPartition int32
}

// String words the conflict for a log line.
func (c GenConflict) String() string {
	how := ""
	if c.Adopted {
		how = " (adopted after retention removed its create)"
	}
	return fmt.Sprintf("stream %s: generation %d in partition %d%s was replaced by generation %d in partition %d; its delete is not in partition %d, so its events there are of a generation that is over: use generation %d's",
		c.Name, c.Gen, c.Partition, how, c.NewerGen, c.NewerPartition, c.Partition, c.NewerGen)
}

// CrossCheck compares the Replays of a topic's partitions (one per
// partition, any order) and returns every stream generation live in one
// of them that a newer generation of its name, live in another, replaced,
// sorted by name and partition. A reader that folds partitions apart
// (forklab log sink) calls it to report what no single partition can tell.
func CrossCheck(reps []*Replay) []GenConflict {
	type live struct {
		gen     int64
		part    int32
		adopted bool
	}
	byName := map[string][]live{}
	for _, rp := range reps {
		for _, s := range rp.streams {
			if !s.w.deleted {
				byName[s.name] = append(byName[s.name], live{s.gen, rp.part, s.trimmed})
			}
		}
	}
	var out []GenConflict
	for name, ls := range byName {
		if len(ls) < 2 {
			continue
		}
		newest := ls[0]
		for _, l := range ls[1:] {
			if l.gen > newest.gen {
				newest = l
			}
		}
		for _, l := range ls {
			if l.gen < newest.gen {
				out = append(out, GenConflict{Name: name, Gen: l.gen, Partition: l.part, Adopted: l.adopted, NewerGen: newest.gen, NewerPartition: newest.part})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Partition < out[j].Partition
	})
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

// replayVersion is the layout of MarshalBinary's output. Version 1 was
// written before the fold kept producer state, Stream-Seq and fork points
// (it cannot decide late records as the service does): UnmarshalReplay
// refuses it.
const replayVersion = 2

// ErrReplayVersion is wrapped by UnmarshalReplay's error for a state of
// another layout version: fold the topic again from its start.
var ErrReplayVersion = errors.New("replay state of another version")

// MarshalBinary encodes the state: the streams of the partition with their
// write state (record number, producers, Stream-Seq) and entries (varints,
// offsets as deltas), the generations seen and deleted, the end of the last
// retention gap. The layout is deterministic: equal states encode equally.
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
	b = binary.AppendVarint(b, p.gapEnd)
	b = binary.AppendUvarint(b, uint64(len(all)))
	for _, s := range all {
		b = appendString(b, s.name)
		b = binary.AppendVarint(b, s.gen)
		b = appendString(b, s.contentType)
		var flags uint64
		for i, f := range []bool{s.w.closed, s.w.deleted, s.w.soft, s.trimmed, p.streams[s.name] == s} {
			if f {
				flags |= 1 << i
			}
		}
		b = binary.AppendUvarint(b, flags)
		b = binary.AppendVarint(b, s.w.nextRec)
		b = binary.AppendVarint(b, int64(s.w.refs))
		b = appendString(b, s.w.streamSeq)
		ids := make([]string, 0, len(s.w.producers))
		for id := range s.w.producers {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		b = binary.AppendUvarint(b, uint64(len(ids)))
		for _, id := range ids {
			st := s.w.producers[id]
			b = appendString(b, id)
			known := uint64(0)
			if st.Known {
				known = 1
			}
			b = binary.AppendUvarint(b, known)
			b = binary.AppendVarint(b, st.Epoch)
			b = binary.AppendVarint(b, st.LastSeq)
		}
		src := -1
		if s.source != nil {
			src = idx[s.source]
		}
		b = binary.AppendVarint(b, int64(src))
		b = binary.AppendVarint(b, s.forkPos)
		b = binary.AppendVarint(b, s.createKoff)
		b = binary.AppendVarint(b, s.tail)
		b = binary.AppendVarint(b, s.last)
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

// UnmarshalReplay decodes a state MarshalBinary encoded. A state of another
// layout version is an error wrapping ErrReplayVersion.
func UnmarshalReplay(b []byte) (*Replay, error) {
	d := decoder{b: b}
	if v := d.uvarint(); v != replayVersion && d.err == nil {
		return nil, fmt.Errorf("%w: layout version %d, this build reads %d (an earlier forklab wrote it, with fold rules that differ): fold the topic again from its start", ErrReplayVersion, v, replayVersion)
	}
	p := NewReplay(int32(d.varint()))
	p.gapEnd = d.varint()
	n := d.uvarint()
	if n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: %d streams in %d bytes", errReplayState, n, len(b))
	}
	all := make([]*rstream, 0, n)
	for i := uint64(0); i < n && d.err == nil; i++ {
		s := &rstream{name: d.string(), gen: d.varint(), part: p.part, contentType: d.string()}
		s.json = isJSON(s.contentType)
		flags := d.uvarint()
		s.w.closed, s.w.deleted, s.w.soft, s.trimmed = flags&1 != 0, flags&2 != 0, flags&4 != 0, flags&8 != 0
		s.w.nextRec = d.varint()
		s.w.refs = int(d.varint())
		s.w.streamSeq = d.string()
		np := d.uvarint()
		if np > uint64(len(b)) {
			return nil, fmt.Errorf("%w: %d producers in %d bytes", errReplayState, np, len(b))
		}
		s.w.producers = make(map[string]fence.State, np)
		for j := uint64(0); j < np && d.err == nil; j++ {
			id := d.string()
			s.w.producers[id] = fence.State{Known: d.uvarint() == 1, Epoch: d.varint(), LastSeq: d.varint()}
		}
		if src := d.varint(); src >= 0 {
			if src >= int64(len(all)) {
				return nil, fmt.Errorf("%w: stream %q refers to a later source", errReplayState, s.name)
			}
			s.source = all[src]
		}
		s.forkPos = d.varint()
		s.createKoff = d.varint()
		s.tail = d.varint()
		s.last = d.varint()
		s.own = int(d.uvarint())
		ne := d.uvarint()
		if ne > uint64(len(b)) {
			return nil, fmt.Errorf("%w: %d entries in %d bytes", errReplayState, ne, len(b))
		}
		if uint64(s.own) > ne {
			return nil, fmt.Errorf("%w: stream %q owns entries from %d of %d", errReplayState, s.name, s.own, ne)
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
