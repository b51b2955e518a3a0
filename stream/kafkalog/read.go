package kafkalog

import (
	"context"
	"fmt"
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
		vals, err := l.values(ctx, part, v.entries[j:j+step], maxBytes-total)
		if err != nil {
			return res, err
		}
		step = len(vals)
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

// Reads from Kafka. On the embedded broker (kfake) one goroutine serves
// every request in arrival order, fetches and produces alike, so a produce
// waits for every fetch queued before it; on a real broker fetches and
// produces share the leader's network and request threads too. Readers
// that catch up from Kafka were unbounded: 200 SSE readers of a cold 3 MB
// stream queued 200 fetches of the whole stream (600 MB) ahead of every
// produce, and appends to any stream waited out the write timeout
// (docs/session-log.md, "Readers and writers"). So the read path fetches
// at most maxReadFetches requests at once, each of at most readFetchBytes;
// readers beyond that wait their turn in arrival order (a channel's
// waiting senders are served first in, first out) and, once it comes,
// take from the cache what a reader before them fetched.
const (
	// maxReadFetches bounds the read path's fetch requests in flight, for
	// the whole Log.
	maxReadFetches = 2
	// readFetchBytes is the MaxBytes of one read-path fetch request. The
	// broker still returns a whole first record batch larger than this
	// (KIP-74), so a large record is read in one request.
	readFetchBytes = 1 << 20
)

// values returns the record values of a prefix of es (at least one entry
// when es is not empty): every entry, or fewer once the values returned
// hold at least need bytes and the next one is not cached. Values come
// from the cache or, for what is missing, from Kafka, one bounded fetch
// request at a time (fetchPrefix).
func (l *Log) values(ctx context.Context, part int32, es []entry, need int) ([][]byte, error) {
	out := make([][]byte, 0, len(es))
	size := 0
	for {
		n := len(out)
		out = l.cache.prefix(part, es[n:], out)
		for _, v := range out[n:] {
			size += len(v)
		}
		if len(out) == len(es) || len(out) > 0 && size >= need {
			return out, nil // all, or enough for the caller: fetch the rest when it asks
		}
		vals, err := l.fetchPrefix(ctx, part, es[len(out):])
		if err != nil {
			return nil, err
		}
		out = append(out, vals...)
		for _, v := range vals {
			size += len(v)
		}
	}
}

// fetchPrefix returns the values of a prefix of es (at least one entry),
// whose first entry was not cached: what the cache holds by the time a
// read fetch slot is free (another reader fetched it meanwhile), else what
// one fetch request of at most readFetchBytes from es[0] returns. A record
// Kafka no longer returns (below the log start offset, or skipped by the
// response) is a Gone error.
func (l *Log) fetchPrefix(ctx context.Context, part int32, es []entry) ([][]byte, error) {
	for empty := 0; ; empty++ {
		recs, hwm, cached, err := l.fetchSlot(ctx, part, es)
		switch {
		case err != nil:
			return nil, err
		case cached != nil:
			return cached, nil
		case len(recs) == 0 && es[0].koff >= hwm:
			return nil, errRetention
		case len(recs) == 0:
			if empty >= 20 {
				return nil, fmt.Errorf("fetch %s/%d at %d returned nothing below high watermark %d", l.cfg.Topic, part, es[0].koff, hwm)
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		var out [][]byte
		var keep []fetched
		for _, f := range recs {
			k := len(out)
			if k == len(es) || es[k].koff < f.koff {
				break // all found, or es[k] is not in the response
			}
			if es[k].koff == f.koff {
				out = append(out, f.value)
				keep = append(keep, f)
			}
		}
		if len(out) == 0 {
			return nil, errRetention
		}
		l.cache.putAll(part, keep)
		return out, nil
	}
}

// fetchSlot waits for a read fetch slot, then returns the cached values
// of a prefix of es if es[0] is cached by now, else the records of one
// fetch request from es[0] and the high watermark.
func (l *Log) fetchSlot(ctx context.Context, part int32, es []entry) (recs []fetched, hwm int64, cached [][]byte, err error) {
	select {
	case l.readSlots <- struct{}{}:
	case <-ctx.Done():
		return nil, 0, nil, ctx.Err()
	}
	defer func() { <-l.readSlots }()
	if cached = l.cache.prefix(part, es, nil); cached != nil {
		return nil, 0, cached, nil
	}
	if l.readFetchHook != nil {
		l.readFetchHook(len(l.readSlots))
	}
	recs, _, hwm, err = l.fetchBatch(ctx, part, es[0].koff, readFetchBytes)
	return recs, hwm, nil, err
}

// cache keeps recent record values in memory within a byte budget, oldest
// out first. Kafka holds every value; the cache only saves fetches.
//
// Readers look values up under the read lock, a run of entries at a time;
// the partition goroutine stores every value it commits under the write
// lock. A sync.Mutex taken per entry put the partition goroutine in line
// behind every reader's next lookup: with 200 readers copying a warm
// stream, appends waited seconds for it (docs/session-log.md, "Readers and
// writers").
type cache struct {
	mu     sync.RWMutex
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

// prefix appends to dst the cached values of es up to the first entry not
// cached, and returns it.
func (c *cache) prefix(part int32, es []entry, dst [][]byte) [][]byte {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, e := range es {
		v, ok := c.m[cacheKey{part, e.koff}]
		if !ok {
			break
		}
		dst = append(dst, v)
	}
	return dst
}

func (c *cache) put(part int32, koff int64, v []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(part, koff, v)
}

// putAll stores the values of fs.
func (c *cache) putAll(part int32, fs []fetched) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range fs {
		c.putLocked(part, f.koff, f.value)
	}
}

func (c *cache) putLocked(part int32, koff int64, v []byte) {
	k := cacheKey{part, koff}
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
