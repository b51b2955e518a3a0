package sweep

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// zstdFastest is the codec of every table: zstd at its fastest level, which
// on these repetitive columns compresses nearly as well as the default.
var zstdFastest = zstd.Codec{Level: zstd.SpeedFastest}

// writerOptions are the Parquet writer options of a table of rows T. They
// change how the columns are encoded, never what they hold (schemas
// defines that):
//
//   - integer columns are DELTA_BINARY_PACKED: the seed column counts up by
//     one, the others are small; both pack to a few bits a value, which
//     leaves zstd a fraction of PLAIN's bytes to compress;
//   - string columns that schemas does not dictionary-encode (the
//     checkpoint JSON) are DELTA_BYTE_ARRAY, which stores each value's
//     prefix shared with the one before by length: consecutive checkpoints
//     share the world, parameters, model and often most of the history
//     (encoded by deltaByteArray, which finds those prefixes faster);
//   - no statistics in data page headers (readers use the column index and
//     the column chunk statistics, which stay), and no min/max at all for
//     string columns: for the checkpoint JSON they would be two long,
//     meaningless strings per page, and every row group holds every arm,
//     label and quadrant, so their bounds prune nothing;
//   - page buffers of 64 KiB (16,384 values a page) for tables of small
//     values: parquet-go allocates a buffer of that size per column and
//     file, and fresh memory costs page faults; tables with a wide column
//     (the checkpoint JSON) keep the default 256 KiB, a few hundred values
//     a page.
//
// Row groups hold at most 2^17 rows.
func writerOptions[T any]() []parquet.WriterOption {
	opts := []parquet.WriterOption{
		parquet.Compression(&zstdFastest),
		parquet.MaxRowsPerRowGroup(1 << 17),
		parquet.CreatedBy("forklab", "", ""),
		parquet.DataPageStatistics(false),
		parquet.DefaultEncodingFor(parquet.ByteArray, &deltaBytes),
	}
	if !hasWideColumn(reflect.TypeFor[T]()) {
		opts = append(opts, parquet.PageBufferSize(64<<10))
	}
	return append(opts, columnOptions(reflect.TypeFor[T]())...)
}

// hasWideColumn reports whether struct type t has a string column that is
// not dictionary-encoded.
func hasWideColumn(t reflect.Type) bool {
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			if hasWideColumn(f.Type) {
				return true
			}
			continue
		}
		_, flags, _ := strings.Cut(f.Tag.Get("parquet"), ",")
		if f.Type.Kind() == reflect.String && !slices.Contains(strings.Split(flags, ","), "dict") {
			return true
		}
	}
	return false
}

// deltaBytes is the encoding of string columns without one of their own.
var deltaBytes deltaByteArray

// columnOptions returns the per-column options for struct type t (see
// writerOptions): struct tag replacements that give its integer columns
// without an encoding in their parquet tag DELTA_BINARY_PACKED, and no
// bounds for its string columns. Fields of embedded structs are columns of
// t.
func columnOptions(t reflect.Type) []parquet.WriterOption {
	var opts []parquet.WriterOption
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			opts = append(opts, columnOptions(f.Type)...)
			continue
		}
		tag, ok := f.Tag.Lookup("parquet")
		if !ok || tag == "-" {
			continue
		}
		name, flags, _ := strings.Cut(tag, ",")
		switch f.Type.Kind() { // parquet-go takes no delta tag on pointers
		case reflect.Int32, reflect.Int64:
			if !hasEncoding(flags) {
				opts = append(opts, parquet.StructTag(reflect.StructTag(fmt.Sprintf("parquet:%q", tag+",delta")), f.Name).(parquet.WriterOption))
			}
		case reflect.String:
			opts = append(opts, parquet.SkipPageBounds(name))
		}
	}
	return opts
}

// hasEncoding reports whether a parquet tag's options name an encoding.
func hasEncoding(flags string) bool {
	for _, f := range strings.Split(flags, ",") {
		switch f {
		case "plain", "dict", "delta", "split", "rle", "bitpacked":
			return true
		}
	}
	return false
}

// table streams one table file's rows into a temporary file that its
// syncer renames into place once synced. Its row buffer is reused across
// files.
type table[T any] struct {
	path, tmp string
	f         *os.File
	w         *parquet.GenericWriter[T]
	buf       []T
	batch     int // rows buffered before they go to the Parquet writer
	n         int64
	opts      []parquet.WriterOption
}

// batchRows is how many rows a table buffers before handing them to the
// Parquet writer, unless the table says otherwise.
const batchRows = 4096

func (t *table[T]) open(dir, name string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	t.path = filepath.Join(dir, name)
	t.tmp = filepath.Join(dir, "."+name+".tmp")
	f, err := os.Create(t.tmp)
	if err != nil {
		return err
	}
	t.f = f
	if t.opts == nil {
		t.opts = writerOptions[T]()
	}
	if t.batch == 0 {
		t.batch = batchRows
	}
	// A fresh writer per file: a Reset writer carries state from its last
	// file into the next one's bytes, and the files must not depend on
	// which worker wrote what before.
	t.w = parquet.NewGenericWriter[T](f, t.opts...)
	t.buf, t.n = t.buf[:0], 0
	return nil
}

// add buffers a row and reports whether the buffer went to the Parquet
// writer, which copies what the rows point to: after a flush, memory the
// buffered rows' strings pointed into may be reused.
func (t *table[T]) add(row T) (flushed bool, err error) {
	t.buf = append(t.buf, row)
	if len(t.buf) >= t.batch {
		return true, t.flush()
	}
	return false, nil
}

func (t *table[T]) flush() error {
	if len(t.buf) == 0 {
		return nil
	}
	_, err := t.w.Write(t.buf)
	t.n += int64(len(t.buf))
	clear(t.buf) // drop references to strings
	t.buf = t.buf[:0]
	return err
}

// commit finishes the file and hands it to s, which syncs it and renames
// it into place.
func (t *table[T]) commit(s *syncer) error {
	err := t.flush()
	if err == nil {
		err = t.w.Close()
	}
	if err != nil {
		return err
	}
	s.commit(t.f, t.tmp, t.path)
	t.f = nil
	return nil
}

func (t *table[T]) abort() {
	if t.f != nil {
		t.f.Close()
		os.Remove(t.tmp)
		t.f = nil
	}
}

// syncer syncs finished table files, closes them and renames them into
// place in the background, so that workers go on computing while the disk
// catches up (an fsync takes milliseconds). wait returns once every file
// handed over is in place, or with the first error.
type syncer struct {
	wg    sync.WaitGroup
	slots chan struct{} // bounds the files in flight
	mu    sync.Mutex
	err   error
}

func newSyncer() *syncer { return &syncer{slots: make(chan struct{}, 16)} }

func (s *syncer) commit(f *os.File, tmp, path string) {
	s.slots <- struct{}{}
	s.wg.Add(1)
	go func() {
		defer func() { <-s.slots; s.wg.Done() }()
		err := f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp, path)
		}
		if err != nil {
			os.Remove(tmp)
			s.mu.Lock()
			if s.err == nil {
				s.err = fmt.Errorf("%s: %w", path, err)
			}
			s.mu.Unlock()
		}
	}()
}

func (s *syncer) wait() error {
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// syncDirs syncs the directories in parallel (their entries are the renamed
// files) and returns the first error.
func syncDirs(dirs []string) error {
	errs := make([]error, len(dirs))
	var wg sync.WaitGroup
	for i, d := range dirs {
		wg.Go(func() { errs[i] = syncDir(d) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
