package kafkalog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
)

// fetched is one record read back from the data topic.
type fetched struct {
	koff    int64
	key     []byte
	value   []byte
	headers []kafka.Header
	time    time.Time
}

// fetchBatch reads records of partition part from offset from, at most
// maxBytes (the broker returns at least one record batch). It reports the
// partition's log start offset and high watermark. A from below the log
// start offset is an OFFSET_OUT_OF_RANGE from the broker, returned as
// errRetention: kafka-go's Reader would silently move to the log start.
func (l *Log) fetchBatch(ctx context.Context, part int32, from int64, maxBytes int) (recs []fetched, logStart, hwm int64, err error) {
	res, err := l.client.Fetch(ctx, &kafka.FetchRequest{
		Topic:     l.cfg.Topic,
		Partition: int(part),
		Offset:    from,
		MinBytes:  1,
		MaxBytes:  int64(maxBytes),
		MaxWait:   10 * time.Millisecond,
	})
	if err != nil {
		return nil, 0, 0, err
	}
	if res.LogStartOffset > 0 {
		l.parts[part].noteLogStart(res.LogStartOffset)
	}
	if res.Error != nil {
		if errors.Is(res.Error, kafka.OffsetOutOfRange) {
			return nil, res.LogStartOffset, res.HighWatermark, errRetention
		}
		return nil, 0, 0, res.Error
	}
	for {
		r, err := res.Records.ReadRecord()
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, 0, 0, fmt.Errorf("read records: %w", err)
		}
		if r.Offset < from {
			continue
		}
		k, err := protocol.ReadAll(r.Key)
		if err != nil {
			return nil, 0, 0, err
		}
		v, err := protocol.ReadAll(r.Value)
		if err != nil {
			return nil, 0, 0, err
		}
		recs = append(recs, fetched{koff: r.Offset, key: k, value: v, headers: r.Headers, time: r.Time})
	}
	return recs, res.LogStartOffset, res.HighWatermark, nil
}

// logStart asks the broker for the partition's log start offset and high
// watermark.
func (l *Log) offsets(ctx context.Context, part int32) (logStart, hwm int64, err error) {
	res, err := l.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{
		l.cfg.Topic: {kafka.FirstOffsetOf(int(part)), kafka.LastOffsetOf(int(part))},
	}})
	if err != nil {
		return 0, 0, err
	}
	for _, po := range res.Topics[l.cfg.Topic] {
		if po.Partition == int(part) {
			if po.Error != nil {
				return 0, 0, po.Error
			}
			return po.FirstOffset, po.LastOffset, nil
		}
	}
	return 0, 0, fmt.Errorf("no offsets for %s/%d", l.cfg.Topic, part)
}

// noteLogStart records a log start offset the broker reported.
func (p *partition) noteLogStart(ls int64) {
	for {
		cur := p.logStart.Load()
		if ls <= cur || p.logStart.CompareAndSwap(cur, ls) {
			return
		}
	}
}

// catchUp applies every record of the partition from p.next (from the log
// start on the initial rebuild) up to the high watermark. It runs before the
// partition goroutine starts, or on it after a failed write.
func (p *partition) catchUp(ctx context.Context, initial bool) error {
	start, hwm, err := p.l.offsets(ctx, p.id)
	if err != nil {
		return err
	}
	p.noteLogStart(start)
	from := p.next
	if (initial && !p.restored) || from < start {
		from = start
	}
	if initial {
		p.l.cfg.Logf("kafkalog: partition %s/%d: reading offsets %d to %d", p.l.cfg.Topic, p.id, from, hwm)
	}
	n, empty := 0, 0
	// A resync runs while readers read: it applies only the last copy of
	// each record (see lastCopies), after reading everything up to the high
	// watermark. The initial rebuild has no readers yet and applies as it
	// reads, moving an entry to each later copy it meets.
	var resync []decoded
	rd := p.l.newPartReader(p.id)
	defer rd.close()
	var last fetched
	apply := func(f fetched) {
		last = f
		if !p.l.key.trusted(p.mac, f.koff, f.key, f.value, f.headers) {
			p.foreign++ // not the log's: never folded in (recordkey.go)
			return
		}
		r, ok, err := decodeRecord(f.key, f.value, f.headers, f.time)
		if err != nil {
			p.l.cfg.Logf("kafkalog: skipping record %s/%d@%d: %v", p.l.cfg.Topic, p.id, f.koff, err)
		} else if ok && initial {
			p.l.apply(p.id, &r, f.koff)
			n++
		} else if ok {
			resync = append(resync, decoded{r, f.koff})
		}
	}
	for from < hwm {
		next, err := rd.read(ctx, from, 16<<20, apply)
		if errors.Is(err, errRetention) {
			// Retention moved the log start past from while we read.
			s2, _, err2 := p.l.offsets(ctx, p.id)
			if err2 != nil {
				return err2
			}
			from = s2
			continue
		}
		if err != nil && next == from {
			if empty++; empty > 20 {
				return fmt.Errorf("read %s/%d at %d: %w", p.l.cfg.Topic, p.id, from, err)
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if next == from {
			// Below the high watermark there must be records; an empty
			// answer is transient. Give up after a few, rather than
			// rebuild a partial state.
			if empty++; empty > 20 {
				return fmt.Errorf("fetch at %d returned nothing %d times below high watermark %d", from, empty, hwm)
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		empty = 0
		from = next
	}
	if last.key != nil || last.headers != nil {
		p.lastRecord = recordSum(last.key, last.headers)
	}
	lc := lastCopies(resync)
	for i := range resync {
		d := &resync[i]
		if lc[copyKey{d.r.stream, d.r.gen, d.r.rec}] != d.koff {
			continue
		}
		p.l.apply(p.id, &d.r, d.koff)
		n++
		if testHookResyncApplied != nil {
			testHookResyncApplied()
		}
	}
	if p.foreign > 0 {
		p.l.cfg.Logf("kafkalog: %s/%d: skipped %d records this log did not write (%s)", p.l.cfg.Topic, p.id, p.foreign, p.foreignWhy())
		p.foreign = 0
	}
	if from > p.next {
		p.applied += from - p.next
	}
	p.next = from
	if initial {
		p.replayed = n
		if p.restored {
			p.l.cfg.Logf("kafkalog: partition %s/%d restored from its snapshot at offset %d, then %d records to %d", p.l.cfg.Topic, p.id, p.covered, n, hwm)
		} else {
			p.l.cfg.Logf("kafkalog: partition %s/%d rebuilt: %d records from offset %d to %d", p.l.cfg.Topic, p.id, n, start, hwm)
		}
	}
	return nil
}

// decoded is a record read back from Kafka and where it is.
type decoded struct {
	r    record
	koff int64
}

// copyKey identifies a record whatever copy of it: a Writer retry writes the
// same stream, generation and record number again.
type copyKey struct {
	stream   string
	gen, rec int64
}

// lastCopies maps every record in recs to the Kafka offset of its last copy,
// the one the Writer reported (or would have). Applying only those keeps an
// earlier copy from ever being visible: a reader that read it and went on
// from the offset after it would meet the record again at the later copy.
func lastCopies(recs []decoded) map[copyKey]int64 {
	last := make(map[copyKey]int64, len(recs))
	for _, d := range recs {
		last[copyKey{d.r.stream, d.r.gen, d.r.rec}] = d.koff
	}
	return last
}

// apply folds one record read back from Kafka into the state. It is the
// rebuild's counterpart of the live decisions: both go through the write
// state's apply, applyR, installCreate and applyDelete, so a restart
// reaches the same state. Which records it takes is wstate.fold's to say,
// which Replay shares.
func (l *Log) apply(part int32, r *record, koff int64) {
	if r.op == opCreate {
		l.applyCreate(part, r, koff)
		return
	}
	l.mu.RLock()
	s := l.streams[r.stream]
	l.mu.RUnlock()
	if s == nil || s.meta.gen != r.gen || s.meta.part != part {
		if s != nil && r.gen > s.meta.gen {
			// A record of a newer generation, whose create retention
			// removed: the generation in the state is over (its delete is
			// in another partition or removed too, or its create was given
			// up on and landed late). Partitions are folded one after
			// another, so without this the first one read would decide.
			l.supersede(s)
			s = nil
		}
		if s == nil && r.op != opDelete && l.adoptable(r.stream, r.gen) {
			// The create record fell out of retention; the stream goes on.
			s = l.adoptTrimmed(part, r)
		} else {
			if s == nil && r.op == opDelete {
				l.noteRemoved(part, r.stream, r.gen)
			}
			return // a record of an earlier generation, or a duplicate of a delete
		}
	}
	switch v := s.w.fold(r); v {
	case foldCopy, foldCopyOfLatest:
		s.moveDuplicate(r.rec, koff, v == foldCopyOfLatest)
		if len(r.value) > 0 && !l.starting {
			l.cache.put(part, koff, r.value)
		}
	case foldTaken:
		if r.op == opDelete {
			l.applyDelete(s)
			return
		}
		if len(r.value) > 0 && !l.starting {
			l.cache.put(part, koff, r.value)
		}
		s.applyR(r, koff)
	}
}

// supersede ends stream generation s, which a record of a newer generation
// of its name replaces: it is deleted as a delete record would delete it
// (soft while forks inherit from it), unless it was already.
func (l *Log) supersede(s *stream) {
	if !s.w.deleted {
		l.cfg.Logf("kafkalog: stream %q: generation %d (partition %d) is replaced by a newer generation whose create retention removed", s.meta.name, s.meta.gen, s.meta.part)
		l.applyDelete(s)
	}
}

// noteRemoved records that generation gen of name was deleted (a delete
// record of a generation the state never saw, its other records removed by
// retention): no record of it or an older generation is adopted later.
func (l *Log) noteRemoved(part int32, name string, gen int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if gen > l.removed[name] {
		l.removed[name] = gen
	}
	if p := l.parts[part]; gen > p.removed[name] {
		p.removed[name] = gen
	}
}

// adoptable reports whether a record of generation gen for a stream not in
// the state starts a stream whose create was trimmed away: a generation at
// least as new as any seen and not one that was deleted.
func (l *Log) adoptable(name string, gen int64) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return gen >= l.gens[name] && gen > l.removed[name]
}

// adoptTrimmed creates the state of a stream whose create record Kafka no
// longer retains, from the headers every record carries. Its TTL, expiry and
// fork origin are lost with the create record.
func (l *Log) adoptTrimmed(part int32, r *record) *stream {
	s := newStream(meta{name: r.stream, gen: r.gen, part: part, contentType: r.contentType,
		json: isJSON(r.contentType), ttl: -1, trimmed: true})
	s.w.nextRec = r.rec
	s.tail = 0
	l.mu.Lock()
	l.streams[r.stream] = s
	if r.gen > l.gens[r.stream] {
		l.gens[r.stream] = r.gen
	}
	if p := l.parts[part]; r.gen > p.gens[r.stream] {
		p.gens[r.stream] = r.gen
	}
	l.mu.Unlock()
	return s
}

// testHookResyncApplied, when set by a test, runs on the partition goroutine
// after each record a resync applies.
var testHookResyncApplied func()
