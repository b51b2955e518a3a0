package sweep

import (
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/parquet-go/parquet-go/format"
)

// tableCodec is the codec of every column of every table file: Snappy, as
// s2 writes it in its fastest mode (EncodeSnappy). Its blocks are plain
// Snappy, which every Parquet reader decodes. It is not parquet-go's SNAPPY
// codec, which compresses with s2's slower "better" mode.
//
// Measured with BenchmarkStages/unit (one worker, 131,072 seeds, CPU per
// seed) and a 1,000,000-seed sweep of the default spec (the four tables'
// bytes):
//
//	zstd at its fastest level, every column            ~1,150 ns  14.6 MB
//	the same, the checkpoint JSON in parquet-go's Snappy ~1,100 ns  19.7 MB
//	Snappy (s2, fastest), every column                 ~1,000 ns  21.9 MB
//
// zstd spent an eighth of the sweep's CPU on the checkpoint JSON alone
// (about 165 bytes a seed once DELTA_BYTE_ARRAY has taken the shared
// prefixes) and much of the rest on the per-page cost of the many small
// columns. The sweep's speed is what users wait for; a sweep of 10 M seeds
// stays near 220 MB.
var tableCodec snappyFast

type snappyFast struct{}

func (*snappyFast) String() string                            { return "SNAPPY" }
func (*snappyFast) CompressionCodec() format.CompressionCodec { return format.Snappy }

// Encode compresses src into one Snappy block, in dst if it has room.
func (*snappyFast) Encode(dst, src []byte) ([]byte, error) {
	return s2.EncodeSnappy(dst[:cap(dst)], src), nil
}

// Decode decompresses a Snappy block, into dst if it has room.
func (*snappyFast) Decode(dst, src []byte) ([]byte, error) {
	return s2.Decode(dst[:cap(dst)], src)
}

// The tables' encodings (layout in columns.go) change how the columns are
// encoded, never what they hold (schemas defines that):
//
//   - integer columns are DELTA_BINARY_PACKED: the seed column counts up by
//     one, the others are small; both pack to a few bits a value, which
//     leaves Snappy a fraction of PLAIN's bytes to compress;
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
