package kafkalog

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Start is the read position "-1": the beginning of the stream (§8).
var Start = Offset{Partition: -1, Pos: -1}

// ReadRequest is a parsed GET (§5.6).
type ReadRequest struct {
	Name string
	// From is where to read from; Start for the beginning.
	From Offset
	// FromTail reads from the current tail (offset=now).
	FromTail bool
	// MaxBytes bounds the data returned; at least one record is returned
	// when any is available.
	MaxBytes int
}

// ReadResult is one chunk of a stream.
type ReadResult struct {
	// Data is the chunk: the bytes as appended, or for JSON streams one
	// JSON array of the messages (§9.1.5).
	Data []byte
	// Records is how many records the chunk holds.
	Records int
	// From is the offset the chunk starts at and Next the one to read from
	// next (Stream-Next-Offset).
	From, Next Offset
	// UpToDate: the chunk reaches the tail as of the read.
	UpToDate bool
	// Closed: the stream is closed and the chunk reaches its final offset.
	Closed      bool
	ContentType string
	JSON        bool
	// ID identifies the stream generation, for ETags.
	ID string
}

// Read returns the stream's data from req.From, up to req.MaxBytes. It
// resets the stream's TTL. Reading from before what Kafka retains, or from
// an offset of an earlier generation of the stream, is a Gone error; from
// an offset the stream never issued (another stream's, a changed one,
// beyond the tail) a BadRequest.
func (l *Log) Read(ctx context.Context, req ReadRequest) (ReadResult, error) {
	s, err := l.lookup(req.Name)
	if err != nil {
		return ReadResult{}, err
	}
	s.touch()
	v := s.snapshot()
	pos, err := l.startPos(s, v, req)
	if err != nil {
		return ReadResult{}, err
	}
	return l.readAt(ctx, s, v, pos, req.MaxBytes)
}

// startPos resolves where a read starts: -1 for the beginning, the tail
// for offset=now, else the position of an offset s issued.
func (l *Log) startPos(s *stream, v view, req ReadRequest) (int64, error) {
	switch {
	case req.FromTail:
		return v.tail, nil
	case req.From == Start:
		return -1, nil
	}
	return s.resolve(req.From, v, l.parts[s.meta.part].logStart.Load())
}

// readAt reads view v of s from position pos (-1: the beginning), which
// startPos resolved.
func (l *Log) readAt(ctx context.Context, s *stream, v view, pos int64, maxBytes int) (ReadResult, error) {
	part := s.meta.part
	res := ReadResult{ContentType: s.meta.contentType, JSON: s.meta.json, ID: streamID(s.meta.name, s.meta.gen)}
	if pos > v.tail {
		return res, errf(BadRequest, "offset %s is beyond the stream's tail %s", s.mint(pos), s.mint(v.tail))
	}
	i := firstAtOrAfter(v.entries, pos)
	// Retention: Kafka has dropped records below the log start offset. A
	// read that would start in the dropped range is refused rather than
	// silently skipping it (§5.6: 410 Gone).
	if !s.retained(v, pos, l.parts[part].logStart.Load()) {
		return res, errRetention
	}
	res.From = Zero // the beginning
	if pos >= 0 {
		res.From = s.mint(pos)
	}
	// Gather entries up to maxBytes (sizes are known only once read, so
	// read in steps).
	if maxBytes <= 0 {
		maxBytes = 1 << 20
	}
	var chunks [][]byte
	total, j := 0, i
	full := false
	for j < len(v.entries) && !full {
		step := min(len(v.entries)-j, 4096)
		vals, err := l.values(ctx, part, v.entries[j:j+step])
		if err != nil {
			return res, err
		}
		for k, val := range vals {
			e := v.entries[j+k]
			if s.meta.json {
				val = jsonInner(val)
			}
			if e.cut >= 0 && int(e.cut) <= len(val) {
				val = val[:e.cut]
			}
			if total > 0 && total+len(val) > maxBytes {
				// The chunk is full; this record starts the next one.
				step, full = k, true
				break
			}
			chunks = append(chunks, val)
			total += len(val)
		}
		j += step
	}
	res.Records = j - i
	if j >= len(v.entries) {
		res.Next = s.mint(v.tail)
		res.UpToDate = true
		res.Closed = v.closed
	} else {
		res.Next = s.mint(v.entries[j-1].koff + 1)
	}
	if s.meta.json {
		n := 2
		for _, c := range chunks {
			n += len(c) + 1
		}
		buf := make([]byte, 0, n)
		buf = append(buf, '[')
		first := true
		for _, c := range chunks {
			if len(c) == 0 {
				continue
			}
			if !first {
				buf = append(buf, ',')
			}
			buf = append(buf, c...)
			first = false
		}
		res.Data = append(buf, ']')
	} else {
		buf := make([]byte, 0, total)
		for _, c := range chunks {
			buf = append(buf, c...)
		}
		res.Data = buf
	}
	return res, nil
}

// Wait blocks until the stream has data at or after the read position, is
// closed, deleted, or until ctx ends or timeout passes; then it reads like
// Read, with the same refusals (checked before waiting). It is the
// long-poll and SSE primitive (§5.7, §5.8): a fork wakes only for its own
// appends.
func (l *Log) Wait(ctx context.Context, req ReadRequest, timeout time.Duration) (ReadResult, error) {
	s, err := l.lookup(req.Name)
	if err != nil {
		return ReadResult{}, err
	}
	// The TTL resets when a live read begins and does not run out while
	// it waits; it restarts from when the reader leaves, so a client that
	// polls again at once finds the stream still there (§5.1).
	s.touch()
	s.liveReaders.Add(1)
	defer func() {
		s.touch()
		s.liveReaders.Add(-1)
	}()
	v := s.watch()
	pos, err := l.startPos(s, v, req)
	if err != nil {
		return ReadResult{}, err
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		if v.removed {
			return ReadResult{}, errNotFound
		}
		if v.soft {
			return ReadResult{}, errSoftGone
		}
		switch {
		case firstAtOrAfter(v.entries, pos) < len(v.entries), v.closed, pos > v.tail:
			// Data to return, the end of a closed stream, or an offset
			// beyond the tail, refused at once rather than after the wait.
			return l.readAt(ctx, s, v, pos, req.MaxBytes)
		case pos >= 0 && pos < v.tail:
			// Nothing at or after pos, yet pos is short of the tail
			// (the end of a fork's inherited data): answer at once
			// with the tail rather than wait at a stale position.
			return l.readAt(ctx, s, v, pos, req.MaxBytes)
		}
		select {
		case <-v.notify:
			v = s.watch()
		case <-timer.C:
			return l.readAt(ctx, s, v, pos, req.MaxBytes)
		case <-ctx.Done():
			return ReadResult{}, ctx.Err()
		}
	}
}

// EarliestOffset is the first offset of a stream from which a read meets
// only records Kafka still retains (the Forklab-Earliest-Offset of a 410):
// Zero, the beginning, when Kafka retains all of the stream.
func (l *Log) EarliestOffset(name string) (Offset, error) {
	s, err := l.lookup(name)
	if err != nil {
		return Offset{}, err
	}
	v := s.snapshot()
	pos := s.earliest(v, l.parts[s.meta.part].logStart.Load())
	if pos < 0 {
		return Zero, nil
	}
	return s.mint(pos), nil
}

// values returns the record values of es, from the cache or from Kafka.
func (l *Log) values(ctx context.Context, part int32, es []entry) ([][]byte, error) {
	out := make([][]byte, len(es))
	var missing []int64
	for i, e := range es {
		if v, ok := l.cache.get(part, e.koff); ok {
			out[i] = v
		} else {
			missing = append(missing, e.koff)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	got, err := l.fetchValues(ctx, part, missing)
	if err != nil {
		return nil, err
	}
	for i, e := range es {
		if out[i] == nil {
			v, ok := got[e.koff]
			if !ok {
				return nil, errRetention
			}
			out[i] = v
		}
	}
	return out, nil
}

// fetchValues reads the values at the given Kafka offsets (ascending) from
// the broker. A record below the log start offset is a Gone error.
func (l *Log) fetchValues(ctx context.Context, part int32, koffs []int64) (map[int64][]byte, error) {
	sort.Slice(koffs, func(i, j int) bool { return koffs[i] < koffs[j] })
	want := make(map[int64]bool, len(koffs))
	for _, k := range koffs {
		want[k] = true
	}
	got := make(map[int64][]byte, len(koffs))
	from := koffs[0]
	last := koffs[len(koffs)-1]
	empty := 0
	for from <= last {
		recs, _, hwm, err := l.fetchBatch(ctx, part, from, 4<<20)
		if err != nil {
			return nil, err
		}
		if len(recs) == 0 {
			if from >= hwm {
				break
			}
			if empty++; empty > 20 {
				return nil, fmt.Errorf("fetch %s/%d at %d returned nothing below high watermark %d", l.cfg.Topic, part, from, hwm)
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		empty = 0
		for _, f := range recs {
			if want[f.koff] {
				got[f.koff] = f.value
				l.cache.put(part, f.koff, f.value)
			}
			from = f.koff + 1
		}
	}
	return got, nil
}

// cache keeps recent record values in memory within a byte budget, oldest
// out first. Kafka holds every value; the cache only saves fetches.
type cache struct {
	mu     sync.Mutex
	budget int64
	used   int64
	m      map[cacheKey][]byte
	fifo   []cacheKey
}

type cacheKey struct {
	part int32
	koff int64
}

func newCache(budget int64) *cache {
	return &cache{budget: budget, m: map[cacheKey][]byte{}}
}

func (c *cache) get(part int32, koff int64) ([]byte, bool) {
	c.mu.Lock()
	v, ok := c.m[cacheKey{part, koff}]
	c.mu.Unlock()
	return v, ok
}

func (c *cache) put(part int32, koff int64, v []byte) {
	k := cacheKey{part, koff}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; ok {
		return
	}
	c.m[k] = v
	c.fifo = append(c.fifo, k)
	c.used += int64(len(v)) + 64
	for c.used > c.budget && len(c.fifo) > 0 {
		old := c.fifo[0]
		c.fifo = c.fifo[1:]
		c.used -= int64(len(c.m[old])) + 64
		delete(c.m, old)
	}
	if cap(c.fifo) > 4*len(c.fifo)+1024 {
		c.fifo = append([]cacheKey(nil), c.fifo...)
	}
}
