package kafkalog

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/forklab/forklab/stream/fence"
)

// partition owns the writes to one partition of the data topic. Its
// goroutine (run) is the only one that decides writes for the streams in the
// partition, which serialises validation and append per (stream, producer) as
// the protocol requires (§5.2.1, Concurrency Requirements).
type partition struct {
	l      *Log
	id     int32
	ops    chan *op
	exited chan struct{} // closed when run returns

	next     int64        // Kafka offset after the last record applied to the state
	logStart atomic.Int64 // the partition's log start offset, as last seen

	// lastRecord identifies the record at next-1 (recordSum), for the
	// snapshot that covers up to next.
	lastRecord uint32
	// gens and removed are the highest generation created and deleted per
	// name by this partition's records (the log's maps hold the maximum
	// over partitions); a snapshot carries them.
	gens, removed map[string]int64
	// applied counts the records folded in since the last snapshot.
	applied int64
	// restored: the state came from a snapshot covering the records below
	// covered; replayed counts the records the start applied after it.
	restored        bool
	covered         int64
	replayed        int
	why             string      // why the start did not use a snapshot
	snapshotRunning atomic.Bool // a snapshot of this partition is being written
	lastSnapshot    time.Time
	chain           *manifest  // the snapshot chain last written or read
	marks           *snapMarks // what the last snapshot written held, for the next delta
	tx              *tx        // the undo record of the batch being flushed, reused
	// want is how many queued ops the lingering partition goroutine waits
	// for (0 when it is not lingering); the writer whose op makes the
	// queue that long signals enough (gather).
	want   atomic.Int64
	enough chan struct{}
	// mac authenticates the records the partition goroutine writes and
	// reads back (recordkey.go); nil without a record key.
	mac *macer
	// foreign counts the records a resync or rebuild found that the log
	// did not write, since the last log line about them.
	foreign int
}

// op is one write request handed to the partition goroutine.
type op struct {
	// decide runs on the partition goroutine against the state including
	// everything decided earlier in the same batch. It returns the record to
	// write, or nil when the request needs no write (a refusal or a
	// duplicate), and what to do once the record is in Kafka.
	decide func(t *tx) *pending
	size   int // bytes the op may add to a produce request
	done   chan error
	// state moves from opQueued to opTaken when the partition goroutine
	// decides the op, or to opAbandoned when its caller stops waiting
	// first; an abandoned op is never decided, so nothing is written.
	state atomic.Int32
	// queued is when the op was submitted (with Config.Stages).
	queued time.Time
}

// Op states.
const (
	opQueued int32 = iota
	opTaken
	opAbandoned
)

// pending is a decided write.
type pending struct {
	rec    *record
	commit func(koff int64) // runs on the partition goroutine after acks=all
}

// tx remembers the write state of every stream a batch touched, to put it
// back if the produce fails. The partition goroutine reuses one tx for
// every batch (reset).
type tx struct {
	undo map[*stream]wstate
	// prods are the producer entries a decision changed in place, with
	// what they held before, in the order they were changed: an append
	// changes one entry of its stream's producer map, so the batch keeps
	// that entry instead of a copy of the map (touchProducer).
	prods []prodUndo
	// cloned are the streams whose whole producer map undo holds a copy of
	// (touch): their entries need no prods.
	cloned map[*stream]bool
}

// prodUndo is one producer entry before a decision changed it.
type prodUndo struct {
	s       *stream
	id      string
	old     fence.State
	existed bool
}

func newTx() *tx { return &tx{undo: map[*stream]wstate{}, cloned: map[*stream]bool{}} }

// reset empties t for the next batch.
func (t *tx) reset() {
	clear(t.undo)
	clear(t.cloned)
	clear(t.prods)
	t.prods = t.prods[:0]
}

// touch snapshots s's whole write state, its producer map copied, before a
// decision changes it.
func (t *tx) touch(s *stream) {
	if t.cloned[s] {
		return
	}
	w := s.w.clone()
	if prev, ok := t.undo[s]; ok {
		// touchFields ran first: keep its fields, which are older, and
		// take the map as it was before the batch (the entries changed
		// since are put back from prods first, see rollback).
		w = prev
		w.producers = maps.Clone(s.w.producers)
		for i := len(t.prods) - 1; i >= 0; i-- {
			if u := t.prods[i]; u.s == s {
				if u.existed {
					w.producers[u.id] = u.old
				} else {
					delete(w.producers, u.id)
				}
			}
		}
	}
	t.undo[s] = w
	t.cloned[s] = true
}

// touchFields snapshots s's write state except the producer map (shared,
// not copied) before a decision changes its fields and at most the
// producer entries it passes to touchProducer.
func (t *tx) touchFields(s *stream) {
	if _, ok := t.undo[s]; !ok {
		t.undo[s] = s.w
	}
}

// touchProducer remembers s's entry for producer id before a decision
// changes it in place (after touchFields or touch).
func (t *tx) touchProducer(s *stream, id string) {
	if t.cloned[s] {
		return
	}
	old, ok := s.w.producers[id]
	t.prods = append(t.prods, prodUndo{s: s, id: id, old: old, existed: ok})
}

// rollback puts back the write state of every stream the batch touched,
// but keeps the record numbers the batch took burnt.
func (t *tx) rollback() {
	// Producer entries first, newest change first, so each ends as it was
	// before its first change; the maps are the ones the streams hold.
	for i := len(t.prods) - 1; i >= 0; i-- {
		u := t.prods[i]
		if u.existed {
			u.s.w.producers[u.id] = u.old
		} else {
			delete(u.s.w.producers, u.id)
		}
	}
	for s, w := range t.undo {
		burnt := max(s.w.burnt, s.w.nextRec)
		s.w = w
		s.w.burnt = max(s.w.burnt, burnt)
	}
}

func newPartition(l *Log, id int32) *partition {
	return &partition{l: l, id: id, ops: make(chan *op, 4096), exited: make(chan struct{}),
		gens: map[string]int64{}, removed: map[string]int64{}, tx: newTx(), enough: make(chan struct{}, 1),
		mac: l.key.newMacer(l.cfg.Topic, id)}
}

// maxBatchRecords bounds the records group-committed in one produce request.
const maxBatchRecords = 1024

// submit hands o to the partition goroutine and waits for its answer, at
// most the write timeout (Config.WriteTimeout) in all. An op still queued
// when the time is up, or when ctx ends, is abandoned: it will not be
// written, and the caller is told so. An op already decided and waiting
// for Kafka cannot be taken back: the caller gets an Unavailable error
// saying it may still land, and late, which delivers the op's eventual
// answer (callers holding the admin lock keep it until then).
func (p *partition) submit(ctx context.Context, o *op) (late <-chan error, err error) {
	o.done = getDone()
	if p.l.cfg.Stages != nil {
		o.queued = time.Now()
	}
	d := p.l.cfg.WriteTimeout
	timeout := getTimer(d)
	defer putTimer(timeout)
	select {
	case p.ops <- o:
		if w := p.want.Load(); w > 0 && int64(len(p.ops)) >= w {
			select {
			case p.enough <- struct{}{}:
			default:
			}
		}
	case <-p.l.stop:
		return nil, errf(Unavailable, "log is shutting down")
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-timeout.C:
		return nil, errf(Unavailable, "the write queue did not move for %s (Kafka is not acknowledging writes); nothing was written: retry", d)
	}
	ctxDone := ctx.Done()
	for {
		select {
		case err := <-o.done:
			putDone(o.done)
			return nil, err
		case <-p.exited:
			select {
			case err := <-o.done:
				putDone(o.done)
				return nil, err
			default:
				return nil, errf(Unavailable, "log is shutting down")
			}
		case <-ctxDone:
			// The caller went away: withdraw the op if it is not decided
			// yet, else wait for its answer (bounded by the timeout).
			if o.state.CompareAndSwap(opQueued, opAbandoned) {
				return nil, ctx.Err()
			}
			ctxDone = nil
		case <-timeout.C:
			if o.state.CompareAndSwap(opQueued, opAbandoned) {
				return nil, errf(Unavailable, "Kafka has not acknowledged writes for %s; this request was not written: retry", d)
			}
			return o.done, errf(Unavailable, "Kafka did not acknowledge the write within %s; it may still land: retry (with the same Producer-Seq a write that landed is answered as a duplicate)", d)
		}
	}
}

// Timers and answer channels of submit are reused: one of each per append
// would otherwise be garbage. A timer goes back stopped (with Go 1.23
// timers, Stop leaves nothing to receive); an answer channel goes back only
// once its one answer was received, so it is empty and nothing else sends
// to it.
var (
	timerPool = sync.Pool{New: func() any {
		t := time.NewTimer(time.Hour)
		t.Stop()
		return t
	}}
	donePool = sync.Pool{New: func() any { return make(chan error, 1) }}
)

func getTimer(d time.Duration) *time.Timer {
	t := timerPool.Get().(*time.Timer)
	t.Reset(d)
	return t
}

func putTimer(t *time.Timer) {
	t.Stop()
	timerPool.Put(t)
}

func getDone() chan error { return donePool.Get().(chan error) }

func putDone(c chan error) { donePool.Put(c) }

// run is the partition goroutine: group commit of everything queued.
func (p *partition) run() {
	defer p.l.wg.Done()
	defer close(p.exited)
	var backlog []*op
	expect, lastFlush := 0, time.Duration(0)
	for {
		if len(backlog) == 0 {
			select {
			case o := <-p.ops:
				backlog = append(backlog, o)
			case <-p.l.stop:
				p.drain()
				p.l.finalSnapshot(p)
				return
			}
		}
		backlog = p.gather(backlog, expect, lastFlush)
		// Take as many ops as fit in one produce request.
		n, bytes := 0, 0
		for n < len(backlog) && n < maxBatchRecords && (n == 0 || bytes+backlog[n].size <= p.l.cfg.MaxBatchBytes) {
			bytes += backlog[n].size
			n++
		}
		batch := backlog[:n]
		t0 := time.Now()
		p.flush(batch)
		lastFlush = time.Since(t0)
		backlog = append(backlog[:0], backlog[n:]...)
		// The next batch can carry what queued during this flush and
		// the next writes of the writers it just answered.
		expect = min(len(backlog)+len(p.ops)+n, maxBatchRecords)
		if p.l.snapshotDue(p) {
			p.l.startSnapshot(p)
		}
	}
}

// gather collects the ops queued behind the first. When writes are slow (a
// synced write), it lingers briefly for the writers the last flush
// answered, who are about to send their next append: without it the
// writers split into groups that take turns, each waiting for the others'
// sync, and batches carry a fraction of them. The linger is at most the
// last flush time and 2 ms (a writer that does not come back costs the
// others at most one more flush time), and ends as soon as expect ops wait
// (what queued during the last flush, and as many as it answered).
func (p *partition) gather(backlog []*op, expect int, lastFlush time.Duration) []*op {
	drain := func() {
		for {
			select {
			case o := <-p.ops:
				backlog = append(backlog, o)
			default:
				return
			}
		}
	}
	drain()
	if lastFlush < 200*time.Microsecond || len(backlog) >= expect {
		return backlog
	}
	// Rather than wake for every op that arrives, the goroutine sleeps
	// until the writers see that the queue holds what it waits for
	// (submit signals enough) or the linger ends, and then takes them all.
	need := int64(expect - len(backlog))
	select {
	case <-p.enough: // a stale signal from an earlier linger
	default:
	}
	p.want.Store(need)
	if int64(len(p.ops)) < need {
		linger := time.NewTimer(min(lastFlush, 2*time.Millisecond))
		select {
		case <-p.enough:
		case <-linger.C:
		case <-p.l.stop:
		}
		linger.Stop()
	}
	p.want.Store(0)
	drain()
	return backlog
}

// drain answers whatever is still queued at shutdown.
func (p *partition) drain() {
	for {
		select {
		case o := <-p.ops:
			o.done <- errf(Unavailable, "log is shutting down")
		default:
			return
		}
	}
}

// flush decides a batch of ops, writes the accepted records in one produce
// request and answers every op once Kafka has acknowledged them (or failed).
func (p *partition) flush(ops []*op) {
	st := p.l.cfg.Stages
	var t0, t1, t2, t3 time.Time
	if st != nil {
		t0 = time.Now()
	}
	t := p.tx
	t.reset()
	var writes []*pending
	n := int64(0) // ops decided: the batch's stages count once for each
	for _, o := range ops {
		if !o.state.CompareAndSwap(opQueued, opTaken) {
			continue // abandoned by its caller: never decided, never written
		}
		n++
		if st != nil {
			st.Ops.Add(1)
			st.Queue.Add(int64(t0.Sub(o.queued)))
		}
		if w := o.decide(t); w != nil {
			writes = append(writes, w)
		}
	}
	if st != nil {
		t1 = time.Now()
		st.Decide.Add(n * int64(t1.Sub(t0)))
	}
	var err error
	if len(writes) > 0 {
		var offsets []int64
		recs := make([]kafka.Record, len(writes))
		for i, w := range writes {
			recs[i] = w.rec.kafkaRecord()
			if p.mac != nil {
				recs[i].Headers = append(recs[i].Headers, p.mac.header([]byte(w.rec.stream), w.rec.value, recs[i].Headers))
			}
		}
		var journaled func() error
		if j := p.l.cfg.Journal; j != nil {
			// Written and synced while the batch is produced.
			jrecs := make([]JournalRecord, len(writes))
			for i, w := range writes {
				jrecs[i] = JournalRecord{Key: []byte(w.rec.stream), Value: w.rec.value, Headers: recs[i].Headers}
			}
			journaled = j.Write(p.id, p.next, jrecs)
		}
		offsets, err = p.write(recs)
		if st != nil {
			t2 = time.Now()
			st.Batches.Add(1)
			st.Records.Add(int64(len(writes)))
			st.Produce.Add(n * int64(t2.Sub(t1)))
		}
		if journaled != nil {
			if jerr := journaled(); jerr != nil && err == nil {
				// The records are in Kafka but not durable: nothing is
				// acknowledged; the resync below folds them in.
				err = fmt.Errorf("the write landed but could not be synced to disk: %w", jerr)
			}
		} else if err == nil && offsets[0] == p.next && p.l.cfg.Sync != nil {
			if serr := p.l.cfg.Sync(p.id); serr != nil {
				// The records are in Kafka but not durable: nothing is
				// acknowledged; the resync below folds them in.
				err = fmt.Errorf("the write landed but could not be synced to disk: %w", serr)
			}
		}
		// Behind records the log did not write (a foreign producer's, or
		// records without forklab's headers), the batch stands: the fold
		// skips them, so it decides as if they were not there. It is made
		// durable where it landed before it is acknowledged.
		foreign := 0
		if err == nil && offsets[0] != p.next {
			foreign = p.foreignBetween(p.next, offsets[0])
			if foreign > 0 {
				if derr := p.durable(); derr != nil {
					err = fmt.Errorf("the write landed but could not be synced to disk: %w", derr)
				}
			}
		}
		if st != nil {
			t3 = time.Now()
			st.Sync.Add(n * int64(t3.Sub(t2)))
		}
		switch {
		case err != nil:
			p.l.cfg.Logf("kafkalog: write to %s/%d failed, resyncing from Kafka: %v", p.l.cfg.Topic, p.id, err)
			err = &Error{Kind: Unavailable, Msg: "Kafka did not acknowledge the write; it may still land: retry (with the same Producer-Seq a write that landed is answered as a duplicate)", Err: err}
		case offsets[0] != p.next && foreign == 0:
			// Records this log did not write sit before the batch: a
			// write it gave up on that landed late, or another writer.
			// The batch was decided without them; the fold of Kafka's
			// records decides what it is now.
			p.l.cfg.Logf("kafkalog: %s/%d holds records %d to %d this log did not write; resyncing", p.l.cfg.Topic, p.id, p.next, offsets[0]-1)
			err = errf(Unavailable, "Kafka holds records this service did not write before this one; the write landed but is not acknowledged: retry (with the same Producer-Seq it is answered as a duplicate)")
		default:
			if foreign > 0 {
				p.l.cfg.Logf("kafkalog: %s/%d: skipped %d records at offsets %d to %d that this log did not write (%s)", p.l.cfg.Topic, p.id, foreign, p.next, offsets[0]-1, p.foreignWhy())
			}
			for i, w := range writes {
				w.commit(offsets[i])
			}
			p.next = offsets[len(offsets)-1] + 1
			last := writes[len(writes)-1].rec
			p.lastRecord = recordSum([]byte(last.stream), recs[len(recs)-1].Headers)
			p.applied += int64(len(writes))
			if st != nil {
				st.Commit.Add(n * int64(time.Since(t3)))
			}
		}
		if err != nil {
			// Put the write state back as it was before the batch, but
			// keep the record numbers the batch took burnt.
			t.rollback()
		}
	}
	for _, o := range ops {
		o.done <- err
	}
	if err != nil {
		// Whatever part of the batch reached Kafka is in the log: apply it,
		// so the state is what Kafka holds before anything else is decided.
		before := p.next // where the batch was to land
		for {
			cerr := p.catchUp(context.Background(), false)
			if cerr == nil && p.l.cfg.Journal != nil && p.next != before {
				// What the broker holds now, the failed batch's
				// records included, is made durable without the journal
				// before its next frame (Journal). When nothing
				// landed, the next frame takes the same offset and
				// replaces the failed batch's.
				cerr = p.l.cfg.Journal.Checkpoint(p.id)
			}
			if cerr == nil {
				break
			}
			p.l.cfg.Logf("kafkalog: resync %s/%d: %v; retrying", p.l.cfg.Topic, p.id, cerr)
			wait := time.After(time.Second)
		refuse:
			for {
				// Until the state is Kafka's again nothing can be
				// decided: refuse at once rather than keep callers waiting.
				select {
				case <-p.l.stop:
					return
				case o := <-p.ops:
					o.done <- errf(Unavailable, "Kafka is unavailable; nothing was written, retry")
				case <-wait:
					break refuse
				}
			}
		}
	}
}

// foreignBetween reads the records at Kafka offsets from to to-1, which a
// batch landed behind, and returns how many there are when none of them
// is the log's own (a record the fold takes: forklab's headers and, with
// a record key, a valid MAC; recordkey.go), 0 otherwise: one is the log's
// (a write it gave up on that landed late), or they could not be read.
func (p *partition) foreignBetween(from, to int64) int {
	ctx, cancel := context.WithTimeout(context.Background(), p.l.cfg.WriteTimeout)
	defer cancel()
	n := 0
	for at := from; at < to; {
		recs, _, _, err := p.l.fetchBatch(ctx, p.id, at, 1<<20)
		if err != nil || len(recs) == 0 {
			return 0
		}
		for _, f := range recs {
			if f.koff >= to {
				return n
			}
			if p.l.key.trusted(p.mac, f.koff, f.key, f.value, f.headers) {
				if _, ok, err := decodeRecord(f.key, f.value, f.headers, f.time); ok && err == nil {
					return 0
				}
			}
			n++
			at = f.koff + 1
		}
	}
	return n
}

// foreignWhy says which records the log takes as its own.
func (p *partition) foreignWhy() string {
	if p.mac != nil {
		return "no valid " + HeaderMAC + " header"
	}
	return "no forklab headers"
}

// durable makes what Kafka holds in the partition durable without the
// journal's frame for the last batch (which named other offsets): a
// checkpoint of the broker's files, or the partition's sync.
func (p *partition) durable() error {
	if j := p.l.cfg.Journal; j != nil {
		return j.Checkpoint(p.id)
	}
	if p.l.cfg.Sync != nil {
		return p.l.cfg.Sync(p.id)
	}
	return nil
}

// write produces the records in one produce request with acks=all and
// returns their offsets. It is one attempt: kafka-go's low-level Produce
// (not its Writer, whose retries would write a record twice). A failed or
// timed-out attempt may have landed, now or later; the caller re-reads
// Kafka to find out, and checks every later batch lands right after what
// it knows.
func (p *partition) write(recs []kafka.Record) ([]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), p.l.cfg.produceTimeout)
	defer cancel()
	res, err := p.l.producer.Produce(ctx, &kafka.ProduceRequest{
		Topic:        p.l.cfg.Topic,
		Partition:    int(p.id),
		RequiredAcks: kafka.RequireAll,
		Records:      kafka.NewRecordReader(recs...),
	})
	if err != nil {
		return nil, err
	}
	if res.Error != nil {
		return nil, res.Error
	}
	for i, e := range res.RecordErrors {
		return nil, fmt.Errorf("record %d: %w", i, e)
	}
	offsets := make([]int64, len(recs))
	for i := range offsets {
		offsets[i] = res.BaseOffset + int64(i)
	}
	return offsets, nil
}
