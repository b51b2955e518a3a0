package sweep

import (
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"

	"github.com/parquet-go/parquet-go/compress/zstd"
)

// zstdFastest is the codec of every column but the long text ones: zstd at
// its fastest level, which on these repetitive columns compresses nearly as
// well as the default.
var zstdFastest = zstd.Codec{Level: zstd.SpeedFastest}

// Long text columns (the checkpoint JSON: about 500 bytes a seed, of which
// DELTA_BYTE_ARRAY leaves about 165 to compress) are Snappy-compressed
// instead (the "snappy" option of their struct tag, columns.go). zstd spent
// about 145 ns a seed on that column alone, an eighth of the whole sweep's
// CPU; Snappy spends about a third of that, and the column grows from 9 to
// 14 MB per million seeds (measured with BenchmarkStages/parquet=checkpoints
// and a 1,000,000-seed sweep). The column is read only to fork a
// checkpoint, and every Parquet reader decodes Snappy.

// The tables' encodings (layout in columns.go) change how the columns are
// encoded, never what they hold (schemas defines that):
//
//   - integer columns are DELTA_BINARY_PACKED: the seed column counts up by
//     one, the others are small; both pack to a few bits a value, which
//     leaves zstd a fraction of PLAIN's bytes to compress;
//   - string columns with few distinct values (arm, label) are
//     dictionary-encoded; the others (the checkpoint JSON) are
//     DELTA_BYTE_ARRAY, which stores each value's prefix shared with the one
//     before by length: consecutive checkpoints share the world, parameters,
//     model and often most of the history (encoded by deltaByteArray, which
//     finds those prefixes faster);
//   - no statistics in data page headers (readers use the column index and
//     the column chunk statistics, which stay), and no min/max at all for
//     string columns: for the checkpoint JSON they would be two long,
//     meaningless strings per page, and every row group holds every arm,
//     label and quadrant, so their bounds prune nothing;
//   - page buffers of 64 KiB for tables of small values: parquet-go
//     allocates a buffer of that size per column and file, and fresh memory
//     costs page faults; tables with a wide column (the checkpoint JSON)
//     keep the default 256 KiB.
//
// Row groups hold at most 2^17 rows.

// deltaBytes is the encoding of string columns without one of their own.
var deltaBytes deltaByteArray

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

// fileInfo describes a finished table file for the manifest and the
// ledger: its path relative to the results directory, size, rows and
// CRC-32C (Castagnoli, as Kafka and cloud object stores use it) of its
// bytes, in hexadecimal.
type fileInfo struct {
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
	Rows   int64  `json:"rows"`
	CRC32C string `json:"crc32c"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// fileCRC returns the CRC-32C and size of the file at path.
func fileCRC(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := crc32.New(castagnoli)
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return fmt.Sprintf("%08x", h.Sum32()), n, nil
}

// crcWriter passes writes on to w and keeps the CRC-32C and the count of
// the bytes written: a table file's checksum and size, computed as it is
// written rather than by reading it back.
type crcWriter struct {
	w   io.Writer
	crc uint32
	n   int64
}

func (c *crcWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.crc = crc32.Update(c.crc, castagnoli, p[:n])
	c.n += int64(n)
	return n, err
}

// commit syncs f (written at tmp through out, holding rows rows), renames
// it to path, and calls done, if not nil, with its description.
func (s *syncer) commit(f *os.File, out crcWriter, tmp, path string, rows int64, done func(fileInfo)) {
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
		if err == nil && done != nil {
			done(fileInfo{Path: path, Bytes: out.n, Rows: rows, CRC32C: fmt.Sprintf("%08x", out.crc)})
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
