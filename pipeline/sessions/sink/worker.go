package sink

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/forklab/forklab/internal/atomicfile"
	"github.com/forklab/forklab/internal/kafkadial"
	"github.com/forklab/forklab/pipeline/sessions/agent"
	"github.com/forklab/forklab/schemas"
	"github.com/forklab/forklab/stream/kafkalog"
)

// worker sinks one partition.
type worker struct {
	cfg  *Config
	rd   *kafkalog.Reader
	part int32
	root string
	rep  *Report
	mu   *sync.Mutex

	// Committed state, and the replay and folds advanced past the records
	// of the open batch.
	st     *state
	replay *kafkalog.Replay
	folds  map[kafkalog.StreamRef]*agent.EventFold
	next   int64 // committed offset
	hwm    int64
	endAt  int64 // without Follow: the high watermark when the run began

	// The open batch: records [next, pos), its events, when its first
	// record came, and where it must end (redoEnd ≥ 0) because files of
	// it exist already.
	pos     int64
	rows    []row
	opened  time.Time
	redoEnd int64
	gaps    []Gap
	nrec    int64 // records of the open batch

	cache  *valueCache
	warned map[string]bool
	// retries counts the sessions started again after an error reaching
	// Kafka.
	retries int
}

// row is an event of the open batch and the date folder it goes to.
type row struct {
	date string
	ev   schemas.SessionEvent
}

// transient marks errors of reaching Kafka: the worker starts again from
// its last commit.
type transient struct{ err error }

func (t transient) Error() string { return t.err.Error() }
func (t transient) Unwrap() error { return t.err }

// run sinks the partition until the end (or ctx, with Follow), starting
// again from the last commit after every error in reaching Kafka.
func (w *worker) run(ctx context.Context) error {
	w.endAt = -1
	w.cache = newValueCache(w.cfg.CacheBytes)
	w.warned = map[string]bool{}
	var failingSince time.Time
	backoff := 100 * time.Millisecond
	for {
		progressed, err := w.session(ctx)
		if err == nil {
			return nil
		}
		var tr transient
		if !errors.As(err, &tr) || ctx.Err() != nil {
			if ctx.Err() != nil && w.cfg.Follow {
				return nil
			}
			return err
		}
		if progressed || failingSince.IsZero() {
			failingSince, backoff = time.Now(), 100*time.Millisecond
			w.cfg.Logf("partition %d: %v; starting again from offset %d", w.part, err, w.next)
		}
		w.retries++
		if d := time.Since(failingSince); d > w.cfg.RetryFor {
			return fmt.Errorf("partition %d: Kafka at %s %w for %s (last: %v): stopping; what was read is committed, and the next run goes on from offset %d (--retry-for sets how long to wait)",
				w.part, strings.Join(w.cfg.Brokers, ","), kafkadial.ErrGone, d.Round(time.Second), tr.err, w.next)
		}
		select {
		case <-ctx.Done():
			if w.cfg.Follow {
				return nil
			}
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// session loads the committed state and sinks from there; progressed says
// whether it committed anything.
func (w *worker) session(ctx context.Context) (progressed bool, err error) {
	st, rp, folds, err := loadState(w.root, w.cfg.Topic, w.part, w.cfg.Prefix)
	if err != nil {
		return false, err
	}
	w.st, w.replay, w.folds, w.next = st, rp, folds, st.Next
	w.pos, w.rows, w.gaps, w.redoEnd, w.nrec = st.Next, nil, nil, -1, 0
	if err := w.findRedo(); err != nil {
		return false, err
	}
	if w.endAt < 0 && !w.cfg.Follow {
		_, hwm, err := w.rd.Offsets(ctx, w.part)
		if err != nil {
			return false, transient{err}
		}
		w.endAt, w.hwm = hwm, hwm
	}
	committed := w.next
	defer func() { progressed = w.next > committed }()
	for {
		if !w.cfg.Follow && w.pos >= w.endAt && w.redoEnd < 0 {
			return progressed, w.rotate()
		}
		if ctx.Err() != nil {
			if w.redoEnd < 0 {
				if err := w.rotate(); err != nil {
					return progressed, err
				}
			}
			return progressed, ctx.Err()
		}
		wait := time.Duration(0)
		if w.cfg.Follow {
			wait = time.Second
			if len(w.rows) > 0 || w.pos > w.next {
				wait = min(wait, max(10*time.Millisecond, time.Until(w.opened.Add(w.cfg.RotateInterval))))
			}
		}
		b, err := w.rd.Fetch(ctx, w.part, w.pos, w.cfg.FetchBytes, wait)
		var re *kafkalog.RetentionError
		switch {
		case errors.As(err, &re):
			w.replay.Gap(re.LogStart)
			w.gap(Gap{Partition: w.part, From: re.From, To: re.LogStart - 1, Records: re.LogStart - re.From,
				What: fmt.Sprintf("partition %d: offsets %d to %d (%d records) were removed by retention before the sink read them",
					w.part, re.From, re.LogStart-1, re.LogStart-re.From)})
			w.advance(re.LogStart)
			if w.redoEnd >= 0 && w.pos > w.redoEnd {
				if err := w.rotateAt(w.redoEnd); err != nil {
					return progressed, err
				}
			}
			continue
		case errors.Is(err, kafkalog.ErrBeyondEnd):
			return progressed, fmt.Errorf("partition %d: the sink's committed offset %d is past the end of %s: was the topic deleted and created again? Sink it into a new --out", w.part, w.pos, w.cfg.Topic)
		case err != nil:
			if ctx.Err() != nil {
				continue
			}
			return progressed, transient{err}
		}
		w.hwm = max(w.hwm, b.HighWatermark)
		for _, s := range b.Skipped {
			if w.redoEnd < 0 || s.Offset <= w.redoEnd {
				w.cfg.Logf("partition %d: offset %d is not a forklab record (%s); skipped, as the log service skips it", w.part, s.Offset, s.Reason)
			}
		}
		next := b.Next
		for _, rec := range b.Records {
			if w.redoEnd >= 0 && rec.Offset > w.redoEnd {
				next = w.redoEnd + 1
				break
			}
			if err := w.apply(ctx, rec); err != nil {
				return progressed, err
			}
			w.advance(rec.Offset + 1)
			if w.redoEnd >= 0 && w.pos > w.redoEnd {
				next = w.pos
				if err := w.rotateAt(w.redoEnd); err != nil {
					return progressed, err
				}
				break
			}
			if w.redoEnd < 0 && len(w.rows) >= w.cfg.RotateRecords {
				if err := w.rotate(); err != nil {
					return progressed, err
				}
			}
		}
		if w.redoEnd >= 0 && next > w.redoEnd+1 {
			next = w.redoEnd + 1
		}
		w.advance(next)
		if w.redoEnd >= 0 && w.pos > w.redoEnd {
			if err := w.rotateAt(w.redoEnd); err != nil {
				return progressed, err
			}
		}
		if w.cfg.Follow && w.redoEnd < 0 && w.pos > w.next && time.Since(w.opened) >= w.cfg.RotateInterval {
			if err := w.rotate(); err != nil {
				return progressed, err
			}
		}
	}
}

// advance moves the read position to pos, opening the batch when its first
// record is read.
func (w *worker) advance(pos int64) {
	if pos <= w.pos {
		return
	}
	if w.pos == w.next {
		w.opened = time.Now()
	}
	w.pos = pos
}

// findRedo looks for files of a batch that starts at the committed offset:
// a crash came between their rename and the commit, and the batch must end
// where they say. Files beyond the commit that do not start there mean the
// state is older than the files.
func (w *worker) findRedo() error {
	files, err := listFiles(w.root, w.cfg.Topic, w.part)
	if err != nil {
		return fmt.Errorf("list %s: %w", w.root, err)
	}
	for _, f := range files {
		switch {
		case f.last < w.next:
		case f.first == w.next && (w.redoEnd < 0 || w.redoEnd == f.last):
			w.redoEnd = f.last
		default:
			return fmt.Errorf("%s covers offsets %d to %d, but the sink's state (%s) says offsets from %d are not written yet: the state is older than the files (restored from a backup?); move the files or the directory aside",
				f.path, f.first, f.last, statePath(w.root, w.cfg.Topic, w.part), w.next)
		}
	}
	if w.redoEnd >= 0 {
		w.cfg.Logf("partition %d: a batch of offsets %d to %d was cut short before its commit; writing it again", w.part, w.next, w.redoEnd)
	}
	return nil
}

// selected reports whether the stream's events go to the files.
func (w *worker) selected(name string) bool { return strings.HasPrefix(name, w.cfg.Prefix) }

// apply folds one record into the replay and turns what became readable in
// a selected stream into rows of the open batch.
func (w *worker) apply(ctx context.Context, rec kafkalog.Record) error {
	ch := w.replay.Apply(rec)
	w.nrec++
	if len(rec.Value) > 0 {
		w.cache.put(rec.Offset, rec.Value, rec.Time)
	}
	for _, r := range ch.Removed {
		delete(w.folds, r)
	}
	if sup := ch.Superseded; sup != (kafkalog.StreamRef{}) && w.selected(sup.Name) {
		w.superseded(kafkalog.GenConflict{Name: sup.Name, Gen: sup.Gen, Partition: w.part, NewerGen: ch.Gen, NewerPartition: w.part})
	}
	if !ch.Applied {
		return nil
	}
	ref := kafkalog.StreamRef{Name: ch.Stream, Gen: ch.Gen}
	sel := w.selected(ch.Stream)
	if sel && ch.Missing > 0 {
		w.gap(Gap{Partition: w.part, From: -1, To: rec.Offset - 1, Records: ch.Missing, Stream: ch.Stream, Gen: ch.Gen,
			What: fmt.Sprintf("stream %s (generation %d): %d records before offset %d are not in Kafka (removed by retention before the sink read them)",
				ch.Stream, ch.Gen, ch.Missing, rec.Offset)})
	}
	if sel && ch.Adopted && rec.Rec > 0 {
		w.gap(Gap{Partition: w.part, From: -1, To: rec.Offset - 1, Records: rec.Rec, Stream: ch.Stream, Gen: ch.Gen,
			What: fmt.Sprintf("stream %s (generation %d): its first %d records, create included, were removed by retention before the sink read them; its events are numbered from 0 at offset %d",
				ch.Stream, ch.Gen, rec.Rec, rec.Offset)})
	}
	if !sel || len(ch.New) == 0 {
		return nil
	}
	if !ch.JSON {
		if !w.warned[ch.Stream] {
			w.warned[ch.Stream] = true
			w.cfg.Logf("stream %s is not a JSON stream (%s): its records are not session events; skipped", ch.Stream, ch.ContentType)
		}
		return nil
	}
	fold := w.folds[ref]
	if fold == nil {
		fold = &agent.EventFold{}
		w.folds[ref] = fold
	}
	inherited := ch.New[:ch.Inherited]
	vals, err := w.values(ctx, inherited)
	if err != nil {
		return err
	}
	idx := ch.Index
	var lost int64
	for i, e := range ch.New {
		var msgs [][]byte
		var t time.Time
		if i >= ch.Inherited {
			msgs, t = kafkalog.Messages(rec.Value, -1), rec.Time
		} else if v, ok := vals[e.Koff]; ok {
			msgs, t = kafkalog.Messages(v.value, e.Cut), v.time
		} else {
			lost += int64(e.Msgs)
			idx += int64(e.Msgs)
			continue
		}
		gen, part, koff, at := ch.Gen, w.part, e.Koff, t.UTC()
		// The offset the log issues to read the stream from this record on.
		readOffset := ch.ReadFrom(i).String()
		for _, m := range msgs {
			ev := fold.Row(ch.Stream, int32(idx), readOffset, m)
			ev.Generation, ev.KafkaPartition, ev.KafkaOffset, ev.AppendedAt = &gen, &part, &koff, &at
			w.rows = append(w.rows, row{date: at.Format(time.DateOnly), ev: ev})
			idx++
		}
	}
	if lost > 0 {
		w.gap(Gap{Partition: w.part, From: -1, To: rec.Offset, Stream: ch.Stream, Gen: ch.Gen, Events: lost,
			What: fmt.Sprintf("stream %s (generation %d): %d events it inherits from %s are not in Kafka (removed by retention before the sink read them)",
				ch.Stream, ch.Gen, lost, rec.ForkedFrom)})
	}
	return nil
}

// values returns the values and times of the records behind entries, from
// the cache or from Kafka; records Kafka no longer holds are absent. A fetch
// reads the whole range between the first and the last record missing and
// keeps every value in the cache: forks of one session copy the same
// records again and again.
func (w *worker) values(ctx context.Context, es []kafkalog.Entry) (map[int64]cached, error) {
	out := make(map[int64]cached, len(es))
	var missing []int64
	for _, e := range es {
		if v, ok := w.cache.get(e.Koff); ok {
			out[e.Koff] = v
		} else {
			missing = append(missing, e.Koff)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	slices.Sort(missing)
	for from, last := missing[0], missing[len(missing)-1]; from <= last; {
		b, err := w.rd.Fetch(ctx, w.part, from, 1<<20, 0)
		var re *kafkalog.RetentionError
		if errors.As(err, &re) {
			from = re.LogStart // what is below is gone
			continue
		}
		if err != nil {
			return nil, transient{err}
		}
		if b.Next == from {
			break // nothing at or after from: the missing ones are gone
		}
		for _, r := range b.Records {
			if len(r.Value) > 0 {
				w.cache.put(r.Offset, r.Value, r.Time)
			}
		}
		from = b.Next
	}
	for _, k := range missing {
		if v, ok := w.cache.get(k); ok {
			out[k] = v
		}
	}
	return out, nil
}

// gap notes a gap of the open batch and reports it at once.
func (w *worker) gap(g Gap) {
	g.Found = time.Now().UTC()
	w.gaps = append(w.gaps, g)
	w.cfg.Logf("GAP: %s", g.What)
	w.mu.Lock()
	w.rep.Gaps = append(w.rep.Gaps, g)
	w.mu.Unlock()
}

// superseded reports a stream generation whose rows the sink may have
// written although a newer generation of its name had replaced it
// (kafkalog.Change.Superseded, kafkalog.CrossCheck).
func (w *worker) superseded(c kafkalog.GenConflict) {
	w.cfg.Logf("GENERATION: %s", c)
	w.mu.Lock()
	w.rep.Superseded = append(w.rep.Superseded, c)
	w.mu.Unlock()
}

// rotate closes the open batch at the read position.
func (w *worker) rotate() error {
	if w.pos <= w.next {
		return nil
	}
	return w.rotateAt(w.pos - 1)
}

// rotateAt commits the open batch as offsets [next, last]: its files first
// (temporary file, fsync, rename; then the directories), then the state.
func (w *worker) rotateAt(last int64) error {
	first := w.next
	byDate := map[string][]schemas.SessionEvent{}
	for _, r := range w.rows {
		byDate[r.date] = append(byDate[r.date], r.ev)
	}
	dates := make([]string, 0, len(byDate))
	for d := range byDate {
		dates = append(dates, d)
	}
	sort.Strings(dates)
	name := FileName(w.cfg.Topic, w.part, first, last)
	var files, again int
	var differ []string
	for _, d := range dates {
		dir := filepath.Join(w.root, DatePrefix+d)
		path := filepath.Join(dir, name)
		res, err := writeFile(path, byDate[d])
		if err != nil {
			return err
		}
		switch res {
		case rewritten:
			again++
		case differing:
			differ = append(differ, path)
			w.cfg.Logf("%s exists with other bytes than the batch made again (retention removed records it holds since?); kept as it is", path)
		}
		files++
		if err := w.hook("file-renamed"); err != nil {
			return err
		}
		if err := atomicfile.SyncDir(dir); err != nil {
			return fmt.Errorf("sync %s: %w", dir, err)
		}
	}
	if len(dates) > 0 {
		if err := atomicfile.SyncDir(w.root); err != nil {
			return fmt.Errorf("sync %s: %w", w.root, err)
		}
	}
	if err := w.hook("files-durable"); err != nil {
		return err
	}
	pos := max(w.pos, last+1)
	w.st.Next = pos
	w.st.Files += int64(files)
	w.st.Events += int64(len(w.rows))
	w.st.Gaps = append(w.st.Gaps, w.gaps...)
	if err := w.st.save(w.root, w.replay, w.folds); err != nil {
		return err
	}
	if err := w.hook("committed"); err != nil {
		return err
	}
	if files > 0 {
		w.cfg.Logf("partition %d: offsets %d to %d: %d events in %s under %s", w.part, first, last, len(w.rows),
			plural(files, "file", "files"), strings.Join(prefixed(dates), ", "))
	}
	w.mu.Lock()
	w.rep.Files += files
	w.rep.Rewritten += again
	w.rep.Events += int64(len(w.rows))
	w.rep.Records += w.nrec
	w.rep.Differing = append(w.rep.Differing, differ...)
	w.mu.Unlock()
	w.next, w.pos = pos, pos
	w.rows, w.gaps, w.redoEnd, w.nrec = nil, nil, -1, 0
	return nil
}

func (w *worker) hook(point string) error {
	if w.cfg.testHook != nil {
		return w.cfg.testHook(point)
	}
	return nil
}

func prefixed(dates []string) []string {
	out := make([]string, len(dates))
	for i, d := range dates {
		out[i] = DatePrefix + d
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// cached is a record value kept for the forks that will copy it.
type cached struct {
	value []byte
	time  time.Time
}

// valueCache keeps recent record values within a byte budget, oldest out
// first. Kafka holds every value; the cache only saves fetches when a fork
// copies its source's recent events.
type valueCache struct {
	budget, used int64
	m            map[int64]cached
	fifo         []int64
}

func newValueCache(budget int64) *valueCache {
	return &valueCache{budget: budget, m: map[int64]cached{}}
}

func (c *valueCache) get(koff int64) (cached, bool) {
	v, ok := c.m[koff]
	return v, ok
}

func (c *valueCache) put(koff int64, v []byte, t time.Time) {
	if _, ok := c.m[koff]; ok {
		return
	}
	c.m[koff] = cached{v, t}
	c.fifo = append(c.fifo, koff)
	c.used += int64(len(v)) + 64
	for c.used > c.budget && len(c.fifo) > 0 {
		old := c.fifo[0]
		c.fifo = c.fifo[1:]
		c.used -= int64(len(c.m[old].value)) + 64
		delete(c.m, old)
	}
	if cap(c.fifo) > 4*len(c.fifo)+1024 {
		c.fifo = append([]int64(nil), c.fifo...)
	}
}
