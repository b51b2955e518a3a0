package recorded

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/maphash"
	"io"
	"os"
	"slices"
	"strconv"
	"time"

	gojson "github.com/goccy/go-json"

	"github.com/forklab/forklab/pipeline/lab"
)

// MaxLine bounds a record's line: 64 MiB, as an agent's reply line.
const MaxLine = 64 << 20

// blockRecords is how many records a block of a file holds: the file is
// listed with where each block starts and the CRC-32C of its bytes, so
// that a unit can start reading at its block and check, block by block,
// that what it reads is what was listed.
const blockRecords = 64

// block is where a block of records starts in a file (byte offset and line
// number of its first record) and the CRC-32C of its bytes, up to the
// next block's start.
type block struct {
	off  int64
	line int64
	crc  uint32
}

// jsonlSource is a JSON Lines file of records.
type jsonlSource struct {
	path    string
	o       Options
	listing Listing
	size    int64
	mtime   time.Time
	blocks  []block
}

// lineReader reads a file line by line, counting byte offsets.
type lineReader struct {
	r   *bufio.Reader
	buf []byte
	off int64
}

func newLineReader(r io.Reader, off int64) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 1<<20), off: off}
}

// next returns the next line with its newline (the last may have none)
// and its byte offset; io.EOF after the last. The line is valid until the
// next call.
func (l *lineReader) next() ([]byte, int64, error) {
	start := l.off
	b, err := l.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		l.buf = append(l.buf[:0], b...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(l.buf) > MaxLine {
				return nil, start, fmt.Errorf("a line longer than %d MiB", MaxLine>>20)
			}
			b, err = l.r.ReadSlice('\n')
			l.buf = append(l.buf, b...)
		}
		b = l.buf
	}
	if errors.Is(err, io.EOF) && len(b) > 0 {
		err = nil
	}
	if err != nil {
		return nil, start, err
	}
	l.off += int64(len(b))
	return b, start, nil
}

// openJSONL lists the JSON Lines file at path: every record is parsed and
// checked (run_id, checkpoint, and for a built-in world the checkpoint's
// world, version and fork step), the run ids are checked for duplicates,
// and each block's start and checksum are kept.
func openJSONL(path string, o Options) (*jsonlSource, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("runs: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("runs: %w", err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("runs %s is a directory: give a .jsonl or .parquet file of records", path)
	}
	s := &jsonlSource{path: path, o: o, size: fi.Size(), mtime: fi.ModTime()}
	lr := newLineReader(f, 0)
	var (
		fileCRC, blkCRC uint32
		lineNo          int64
		rec             lab.Record
		t               = newTally(o)
	)
	for {
		line, start, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("runs %s line %d: %w", path, lineNo+1, err)
		}
		lineNo++
		fileCRC = crc32.Update(fileCRC, castagnoli, line)
		body := bytes.TrimSpace(line)
		if len(body) == 0 {
			blkCRC = crc32.Update(blkCRC, castagnoli, line)
			continue
		}
		if uint64(len(t.ids))%blockRecords == 0 {
			if len(s.blocks) > 0 {
				s.blocks[len(s.blocks)-1].crc = blkCRC
			}
			s.blocks = append(s.blocks, block{off: start, line: lineNo})
			blkCRC = 0
		}
		blkCRC = crc32.Update(blkCRC, castagnoli, line)
		if err := t.add(body, path+" line "+strconv.FormatInt(lineNo, 10), &rec); err != nil {
			return nil, err
		}
		if len(t.ids) == 1024 && lr.off > 0 {
			// Room for every run at once, as the first lines' length
			// foretells (a tenth more): growing by doubling would hold
			// twice the ids for a moment.
			t.ids = slices.Grow(t.ids, int(s.size/(lr.off/1024+1)*11/10))
		}
	}
	if len(t.ids) == 0 {
		return nil, fmt.Errorf("runs %s holds no record: a record is one line {\"run_id\": …, \"checkpoint\": …}", path)
	}
	s.blocks[len(s.blocks)-1].crc = blkCRC
	if lr.off != s.size {
		return nil, fmt.Errorf("runs %s %w: it had %d bytes when the sweep began listing it, %d by the end", path, ErrChanged, s.size, lr.off)
	}
	if t.repeats() {
		if err := s.duplicates(t); err != nil {
			return nil, err
		}
	}
	s.listing = Listing{Format: FormatJSONL, Runs: uint64(len(t.ids)), Bytes: s.size, CRC32C: crcText(fileCRC),
		ForkSteps: sortedSteps(t.steps), Metadata: t.meta}
	return s, nil
}

// recordStep returns the fork step of a record's checkpoint and checks it:
// a built-in world's checkpoint says its world, version and step (peeked
// at here, decoded strictly when forked); an agent's record says its step
// or takes the sweep's only one. The step is set on the record.
func recordStep(rec *lab.Record, o Options) (int, error) {
	f := &rec.Forks[0]
	step := f.ForkStep
	if o.Builtin {
		var h struct {
			World        string `json:"world"`
			WorldVersion string `json:"world_version"`
			ForkStep     int    `json:"fork_step"`
		}
		if err := gojson.Unmarshal(f.Checkpoint, &h); err != nil || h.World == "" {
			return 0, lab.BadRecord(rec.Where, "world %s cannot decode its checkpoint: not a checkpoint object that names its world (forklab checkpoint prints one)", o.Decl.Name)
		}
		if h.World != o.Decl.Name || h.WorldVersion != o.Decl.Version {
			return 0, lab.BadRecord(rec.Where, "its checkpoint is of world %s version %q, and this sweep plays world %s version %q: sweep it with its own world, or make the checkpoint again with this forklab", h.World, h.WorldVersion, o.Decl.Name, o.Decl.Version)
		}
		if step != 0 && step != h.ForkStep {
			return 0, lab.BadRecord(rec.Where, "fork_step is %d, but its checkpoint was taken at fork step %d", step, h.ForkStep)
		}
		if h.ForkStep < 1 {
			return 0, lab.BadRecord(rec.Where, "world %s cannot decode its checkpoint: fork_step %d is below 1", o.Decl.Name, h.ForkStep)
		}
		step = h.ForkStep
	}
	if step == 0 {
		if len(o.ForkAt) != 1 {
			return 0, lab.BadRecord(rec.Where, "no fork_step: an agent's checkpoint does not say where its run was checkpointed: give fork_step in the record, or the one fork step of every record with --fork-at")
		}
		step = o.ForkAt[0]
	}
	if o.ForkAt != nil && !slices.Contains(o.ForkAt, step) {
		return 0, lab.BadRecord(rec.Where, "its checkpoint is at fork step %d, and the sweep forks at %s (--fork-at): leave --fork-at out to fork every record at its own step", step, stepsText(o.ForkAt))
	}
	if o.NeedFeatures && f.Features == nil {
		return 0, lab.BadRecord(rec.Where, "no features, and agent world %s does not declare the inspect capability to compute them from the checkpoint: give the record its features (and hidden), or implement inspect (docs/agent-protocol.md)", o.Decl.Name)
	}
	if !o.Builtin {
		f.ForkStep = step
	}
	return step, nil
}

// tally is what listing a file counts of its records: the fork steps they
// are at, whether any has metadata, and the hash of each run id (8 bytes a
// run), to find run ids listed twice.
type tally struct {
	o     Options
	steps map[int]bool
	meta  bool
	seed  maphash.Seed
	ids   []uint64
}

func newTally(o Options) *tally {
	return &tally{o: o, steps: map[int]bool{}, seed: maphash.MakeSeed()}
}

// add reads the record b (where names it) into rec, checks it, and counts
// it.
func (t *tally) add(b []byte, where string, rec *lab.Record) error {
	if err := parseRecord(b, where, rec); err != nil {
		return err
	}
	step, err := recordStep(rec, t.o)
	if err != nil {
		return err
	}
	t.steps[step] = true
	t.meta = t.meta || len(rec.Metadata) > 0
	t.ids = append(t.ids, maphash.String(t.seed, rec.RunID))
	return nil
}

// repeats sorts the hashes and reports whether two are equal: two runs may
// share an id (or their hashes collide), which only reading them again
// tells apart.
func (t *tally) repeats() bool {
	slices.Sort(t.ids)
	for i := 1; i < len(t.ids); i++ {
		if t.ids[i] == t.ids[i-1] {
			return true
		}
	}
	return false
}

// duplicates reports the first run id two records share: the records
// whose hashes t found equal are read again to compare their ids and name
// their lines.
func (s *jsonlSource) duplicates(t *tally) error {
	dup := map[uint64]bool{}
	for i := 1; i < len(t.ids); i++ {
		if t.ids[i] == t.ids[i-1] {
			dup[t.ids[i]] = true
		}
	}
	f, err := os.Open(s.path)
	if err != nil {
		return fmt.Errorf("runs: %w", err)
	}
	defer f.Close()
	lr := newLineReader(f, 0)
	seen := map[string]int64{}
	var rec lab.Record
	for lineNo := int64(1); ; lineNo++ {
		line, _, err := lr.next()
		if err != nil {
			return nil // hash collisions only
		}
		body := bytes.TrimSpace(line)
		if len(body) == 0 || parseRecord(body, "", &rec) != nil || !dup[maphash.String(t.seed, rec.RunID)] {
			continue
		}
		if first, ok := seen[rec.RunID]; ok {
			return lab.BadRecord(fmt.Sprintf("%s line %d", s.path, lineNo), "run_id %q is that of line %d too: run ids must be unique in a population", rec.RunID, first)
		}
		seen[rec.RunID] = lineNo
	}
}

func (s *jsonlSource) Listing() Listing { return s.listing }

func (s *jsonlSource) Close() error { return nil }

// Check compares the file's size and modification time with the
// listing's.
func (s *jsonlSource) Check() error { return checkFile(s.path, s.size, s.mtime) }

// checkFile reports a file that is not of size bytes, modified at mtime,
// as it was when the sweep listed it.
func checkFile(path string, size int64, mtime time.Time) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("runs %s %w: %v", path, ErrChanged, err)
	}
	if fi.Size() != size || !fi.ModTime().Equal(mtime) {
		return fmt.Errorf("runs %s %w: it was written to (%d bytes, modified %s; it had %d bytes, modified %s): sweep a copy that nothing writes to",
			path, ErrChanged, fi.Size(), fi.ModTime().UTC().Format(time.RFC3339Nano), size, mtime.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// Read reads records [lo, hi) from the start of lo's block, checking the
// CRC-32C of every block it reads (to the end of hi's) against the
// listing's.
func (s *jsonlSource) Read(ctx context.Context, lo, hi uint64) (lab.Records, func(), error) {
	if lo > hi || hi > s.listing.Runs {
		return nil, nil, fmt.Errorf("runs %s: positions %d:%d are outside its %d records", s.path, lo, hi, s.listing.Runs)
	}
	if lo == hi {
		return func(context.Context) (*lab.Record, error) { return nil, nil }, func() {}, nil
	}
	f, err := os.Open(s.path)
	if err != nil {
		return nil, nil, fmt.Errorf("runs %s %w: %v", s.path, ErrChanged, err)
	}
	b := lo / blockRecords
	if _, err := f.Seek(s.blocks[b].off, io.SeekStart); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("runs %s: %w", s.path, err)
	}
	lr := newLineReader(f, s.blocks[b].off)
	var (
		pos    = b * blockRecords
		cur    = b
		crc    uint32
		lineNo = s.blocks[b].line - 1
		rec    lab.Record
	)
	changed := func(why string) error {
		return fmt.Errorf("runs %s %w: %s (sweep a copy that nothing writes to)", s.path, ErrChanged, why)
	}
	verify := func() error {
		if crc != s.blocks[cur].crc {
			end := "its end"
			if int(cur)+1 < len(s.blocks) {
				end = fmt.Sprint(s.blocks[cur+1].line - 1)
			}
			return changed(fmt.Sprintf("lines %d to %s are not the bytes that were listed (CRC-32C %s, listed %s)", s.blocks[cur].line, end, crcText(crc), crcText(s.blocks[cur].crc)))
		}
		return nil
	}
	next := func(ctx context.Context) (*lab.Record, error) {
		for {
			line, start, err := lr.next()
			if errors.Is(err, io.EOF) {
				if pos != s.listing.Runs {
					return nil, changed(fmt.Sprintf("it ends after %d records; it held %d", pos, s.listing.Runs))
				}
				return nil, verify()
			}
			if err != nil {
				return nil, fmt.Errorf("runs %s line %d: %w", s.path, lineNo+1, err)
			}
			lineNo++
			body := bytes.TrimSpace(line)
			if len(body) > 0 && pos%blockRecords == 0 && pos > b*blockRecords {
				// A new block begins: the one before is read whole.
				if err := verify(); err != nil {
					return nil, err
				}
				if pos >= hi {
					return nil, nil
				}
				cur++
				crc = 0
				if int(cur) >= len(s.blocks) || start != s.blocks[cur].off {
					return nil, changed(fmt.Sprintf("record %d does not begin at byte %d as listed", pos+1, s.blocks[min(int(cur), len(s.blocks)-1)].off))
				}
			}
			crc = crc32.Update(crc, castagnoli, line)
			if len(body) == 0 {
				continue
			}
			p := pos
			pos++
			if p < lo || p >= hi {
				continue // before the unit, or read on for its block's checksum
			}
			if err := parseRecord(body, s.path+" line "+strconv.FormatInt(lineNo, 10), &rec); err != nil {
				return nil, err
			}
			if !s.o.Builtin { // a built-in world's checkpoint says its step
				if _, err := recordStep(&rec, s.o); err != nil {
					return nil, err
				}
			}
			rec.Pos = p
			return &rec, nil
		}
	}
	return next, func() { f.Close() }, nil
}

// sortedSteps lists the keys of steps in order.
func sortedSteps(steps map[int]bool) []int {
	out := make([]int, 0, len(steps))
	for s := range steps {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// stepsText lists fork steps as "3" or "1,2,3".
func stepsText(steps []int) string {
	var b []byte
	for i, s := range steps {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(s), 10)
	}
	return string(b)
}
