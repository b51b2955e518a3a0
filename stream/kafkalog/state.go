package kafkalog

import (
	"maps"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forklab/forklab/stream/fence"
)

// meta is what a stream was created with. It never changes.
type meta struct {
	name        string
	gen         int64
	part        int32
	contentType string
	json        bool
	ttl         int64 // sliding TTL in seconds; -1 when none
	expiresAt   time.Time
	forkedFrom  string
	forkOffset  string // as the client gave it, or the source tail it defaulted to
	forkPos     int64  // the fork point in the partition: positions up to it are the source's; -1 for Zero
	forkSub     int64
	source      *stream // the stream this fork inherits from; nil for a root
	trimmed     bool    // its create record fell out of Kafka's retention
}

// entry is one record of a stream's view: its own appends and, for a fork,
// the source records it inherits. Entries are ordered by koff.
type entry struct {
	koff int64 // Kafka offset of the record that holds the bytes
	rec  int64 // record number within the owning stream generation
	cut  int32 // -1: the whole record; else the bytes kept (of the value, or of the JSON array body)
}

// producerTuple names the append that closed a stream, for the protocol's
// "duplicate close" rule (§5.2.1, Stream Closure with Idempotent Producers).
type producerTuple struct {
	id         string
	epoch, seq int64
}

// wstate is the write side of a stream: what the partition's goroutine
// decides appends against. Only that goroutine (or the single-threaded
// rebuild) touches it.
type wstate struct {
	// nextRec is one past the highest record number the fold of Kafka's
	// records applied: a record numbered below it is a copy.
	nextRec int64
	// burnt is one past the highest record number the log ever assigned,
	// including in writes that failed: a number is never assigned twice,
	// so a failed write that lands late can never pass for a copy of a
	// later record (it is then the copy, and ignored).
	burnt     int64
	producers map[string]fence.State
	streamSeq string
	closed    bool
	closer    *producerTuple
	deleted   bool // hard- or soft-deleted
	soft      bool
	refs      int // live forks that inherit from this stream
}

func (w wstate) clone() wstate {
	w.producers = maps.Clone(w.producers)
	return w
}

// allocRec assigns the number of the next record the log writes.
func (w *wstate) allocRec() int64 {
	n := max(w.nextRec, w.burnt)
	w.burnt = n + 1
	return n
}

// stream is one stream generation.
type stream struct {
	meta meta
	w    wstate

	lastAccess  atomic.Int64 // unix nanoseconds of the last read or write, for Stream-TTL
	liveReaders atomic.Int32 // long-polls and SSE waits in progress: the TTL does not run out under them

	mu         sync.RWMutex // guards the fields below, which readers see
	rewrites   int          // times moveDuplicate rewrote an entry in place (for snapshot deltas)
	entries    []entry
	own        int   // index of the first entry the stream wrote itself
	createKoff int64 // Kafka offset of the create record; -1 when trimmed away
	tail       int64 // position of the tail offset
	closed     bool
	producers  map[string]fence.State // committed producer state, for ProducerState
	soft       bool                   // soft-deleted: retained for forks, gone to clients
	removed    bool
	notify     chan struct{} // closed on every change; made by the first waiter after it (watch)
}

func newStream(m meta) *stream {
	s := &stream{meta: m, createKoff: -1}
	s.w.producers = map[string]fence.State{}
	s.touch()
	return s
}

func (s *stream) touch() { s.lastAccess.Store(time.Now().UnixNano()) }

// changedLocked wakes every waiter; s.mu must be held for writing. The
// channel is made when a reader first needs one (snapshot), so that a
// stream nobody waits on (every stream while the log starts) costs no
// channel per record.
func (s *stream) changedLocked() {
	if s.notify != nil {
		close(s.notify)
		s.notify = nil
	}
}

// expired reports whether the stream's TTL or expiry has passed at now. A
// live reader keeps the TTL from running out (protocol §5.1: "a stream with
// active live readers will not expire"); Stream-Expires-At is a hard
// deadline that nothing extends.
func (s *stream) expired(now time.Time) bool {
	if !s.meta.expiresAt.IsZero() && !now.Before(s.meta.expiresAt) {
		return true
	}
	// A TTL beyond what time.Duration holds (~292 years) would overflow
	// to a negative window; such a stream cannot have been idle that long.
	if s.meta.ttl >= 0 && s.meta.ttl <= maxTTLSeconds && s.liveReaders.Load() == 0 {
		last := time.Unix(0, s.lastAccess.Load())
		if now.Sub(last) >= time.Duration(s.meta.ttl)*time.Second {
			return true
		}
	}
	return false
}

// maxTTLSeconds is the longest Stream-TTL, in seconds, that time.Duration
// can hold; longer ones never run out.
const maxTTLSeconds = int64(math.MaxInt64 / time.Second)

// apply folds an append or close record into the write state. The live
// path calls it when it accepts a request, the fold of Kafka's records
// (fold) for every record that admit accepts.
func (w *wstate) apply(r *record) {
	w.nextRec = r.rec + 1
	if r.hasProducer {
		w.producers[r.producerID] = fence.Replay(w.producers[r.producerID], fence.Request{Epoch: r.epoch, Seq: r.seq})
	}
	if r.streamSeq != "" {
		w.streamSeq = r.streamSeq
	}
	if r.closed {
		w.closed = true
		if r.hasProducer {
			w.closer = &producerTuple{r.producerID, r.epoch, r.seq}
		}
	}
}

// foldVerdict is what the fold of Kafka's records — the log's start, its
// resync after a failed write, and Replay — does with a record of a stream
// generation it holds (fold).
type foldVerdict int

const (
	// foldTaken: an append or close the rules admit, folded into the
	// write state (apply), or a delete; the caller applies it.
	foldTaken foldVerdict = iota
	// foldCopy: a record number the fold has passed: a second copy of an
	// older record, or a write the log gave up on that landed after later
	// records were numbered (its number was burnt and never reassigned).
	// Nothing changes.
	foldCopy
	// foldCopyOfLatest: a second copy of the generation's latest record
	// (a produce that wrote it twice): the index moves to the later copy
	// (moveDuplicate).
	foldCopyOfLatest
	// foldRefused: an append or close that admit refuses (it landed late,
	// after the stream was closed, or repeats a producer seq, or comes from
	// a stale epoch, or does not raise the Stream-Seq): its number is
	// taken, nothing else changes.
	foldRefused
	// foldUnknown: an operation this version does not know; nothing
	// changes.
	foldUnknown
)

// fold decides a record of the stream generation whose write state w is,
// read back from Kafka in offset order, and folds its number and (when
// taken) its append or close into w. Copies are recognised by the record
// number alone: a number the log assigned is never assigned again, even
// when the write that carried it failed (allocRec).
func (w *wstate) fold(r *record) foldVerdict {
	if r.rec < w.nextRec {
		if r.rec == w.nextRec-1 {
			return foldCopyOfLatest
		}
		return foldCopy
	}
	switch r.op {
	case opAppend, opClose:
		if !w.admit(r) {
			w.nextRec = r.rec + 1
			return foldRefused
		}
		w.apply(r)
		return foldTaken
	case opDelete:
		w.nextRec = r.rec + 1
		return foldTaken
	}
	return foldUnknown
}

// admit reports whether the fold of Kafka's records (fold) takes an append or
// close record read back: the rules the live path decides by, for what a
// record can break by arriving late (a write the log gave up on that
// landed after later writes were decided): not after the stream was
// closed, not a duplicate or stale producer seq, not a Stream-Seq
// regression. A producer seq that skips ahead is taken (records before it
// may have been dropped by retention), as fence.Replay does.
func (w *wstate) admit(r *record) bool { return w.refusal(r) == "" }

// refusal is why admit refuses r (one of the Refused… texts, replay.go),
// or "" when it takes it.
func (w *wstate) refusal(r *record) string {
	if w.closed {
		return RefusedClosed
	}
	if r.hasProducer {
		switch fence.Decide(w.producers[r.producerID], fence.Request{Epoch: r.epoch, Seq: r.seq}).Verdict {
		case fence.Duplicate:
			return RefusedDuplicate
		case fence.StaleEpoch:
			return RefusedStaleEpoch
		}
	}
	if r.streamSeq != "" && w.streamSeq != "" && r.streamSeq <= w.streamSeq {
		return RefusedStreamSeq
	}
	return ""
}

// applyR makes an append or close record at koff visible to readers and
// returns the tail right after it.
func (s *stream) applyR(r *record, koff int64) (tail int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(r.value) > 0 {
		s.entries = append(s.entries, entry{koff: koff, rec: r.rec, cut: -1})
		s.tail = koff + 1
	}
	if r.hasProducer {
		if s.producers == nil {
			s.producers = map[string]fence.State{}
		}
		s.producers[r.producerID] = fence.Replay(s.producers[r.producerID], fence.Request{Epoch: r.epoch, Seq: r.seq})
	}
	if r.closed {
		s.closed = true
	}
	s.changedLocked()
	return s.tail
}

// moveDuplicate handles a second copy of record number rec at koff. A copy
// of the stream's latest record (rec is its last number, latest) is the one
// a retried produce wrote after the attempt whose answer was lost; the
// later copy is the one the writer was told about, so the entry moves to it
// and the earlier copy is never read; offsets stay strictly increasing
// because both copies follow everything before them. A copy of an older
// record (written by another tool, or by a retry that landed after later
// records) is ignored: moving the entry would put it out of order.
func (s *stream) moveDuplicate(rec, koff int64, latest bool) {
	if !latest {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec == 0 && koff > s.createKoff {
		s.createKoff = koff
	}
	for i := len(s.entries) - 1; i >= s.own; i-- {
		e := s.entries[i]
		if e.rec < rec {
			break
		}
		if e.rec == rec && koff > e.koff {
			// Copy on write: readers may hold the old slice.
			es := make([]entry, len(s.entries))
			copy(es, s.entries)
			es[i].koff = koff
			s.entries = es
			s.rewrites++
		}
	}
	s.tail = s.createKoff + 1
	if n := len(s.entries); n > 0 && s.entries[n-1].koff+1 > s.tail {
		s.tail = s.entries[n-1].koff + 1
	}
	s.changedLocked()
}

// view returns the stream's entries and tail as readers see them now.
type view struct {
	entries    []entry
	createKoff int64 // Kafka offset of the create record; -1 when trimmed away
	tail       int64
	closed     bool
	soft       bool
	removed    bool
	notify     <-chan struct{}
}

func (s *stream) snapshot() view {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return view{entries: s.entries[:len(s.entries):len(s.entries)], createKoff: s.createKoff, tail: s.tail,
		closed: s.closed, soft: s.soft, removed: s.removed}
}

// watch is snapshot with a channel that is closed on the stream's next
// change; the first waiter since the last change makes it.
func (s *stream) watch() view {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.notify == nil {
		s.notify = make(chan struct{})
	}
	return view{entries: s.entries[:len(s.entries):len(s.entries)], createKoff: s.createKoff, tail: s.tail,
		closed: s.closed, soft: s.soft, removed: s.removed, notify: s.notify}
}

// firstAtOrAfter returns the index of the first entry at or after pos.
func firstAtOrAfter(es []entry, pos int64) int {
	lo, hi := 0, len(es)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if es[m].koff < pos {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// Stages accumulates where appends spend their time, for the append-path
// profile (make bench-log-profile). Durations are nanoseconds summed:
// Queue over ops (from submit to the partition goroutine deciding it,
// group-commit linger included); Decide, Produce (the produce request
// through kafka-go and the broker), Sync (to disk) and Commit (making the
// records visible and answering) over batches, each batch counted once for
// every op it decided (so that Sync/Ops is the mean time an op waited for
// the sync); the HTTP ones over append
// requests, filled in by stream/server: Requests, HTTPIn (from the
// handler's start, headers parsed, to the append handed to the log: body
// read and checks), Log (the log's Append) and HTTPOut (the answer).
type Stages struct {
	Ops, Batches, Records                atomic.Int64
	Queue, Decide, Produce, Sync, Commit atomic.Int64
	Requests, HTTPIn, Log, HTTPOut       atomic.Int64
}
