package sink

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/forklab/forklab/internal/atomicfile"
	"github.com/forklab/forklab/pipeline/sessions/agent"
	"github.com/forklab/forklab/schemas"
)

// DatePrefix is the Hive partition key of the sink's folders: the UTC date
// of the records the events come from.
const DatePrefix = "event_date="

// FileName is the name of the file of a batch: topic, partition, and the
// first and last Kafka offsets of the batch, zero-padded to 16 digits (as
// the log's offsets are) so that names sort by offset.
func FileName(topic string, part int32, first, last int64) string {
	return fmt.Sprintf("%s+%d+%016d+%016d.parquet", topic, part, first, last)
}

// ParseFileName reverses FileName; ok is false for any other name.
func ParseFileName(name string) (topic string, part int32, first, last int64, ok bool) {
	base, found := strings.CutSuffix(name, ".parquet")
	if !found || strings.HasPrefix(name, ".") {
		return "", 0, 0, 0, false
	}
	f := strings.Split(base, "+")
	if len(f) != 4 {
		return "", 0, 0, 0, false
	}
	p, err1 := strconv.ParseInt(f[1], 10, 32)
	a, err2 := strconv.ParseInt(f[2], 10, 64)
	b, err3 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || a > b || f[0] == "" {
		return "", 0, 0, 0, false
	}
	return f[0], int32(p), a, b, true
}

// batchFile is a file of the sink directory.
type batchFile struct {
	path        string
	first, last int64
}

// listFiles returns the files of topic's partition part under root, and
// removes the temporary files a killed sink left behind.
func listFiles(root, topic string, part int32) ([]batchFile, error) {
	var out []batchFile
	dirs, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	for _, d := range dirs {
		if !d.IsDir() || !(strings.HasPrefix(d.Name(), DatePrefix) || d.Name() == StateDir) {
			continue
		}
		ents, err := os.ReadDir(filepath.Join(root, d.Name()))
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			name := e.Name()
			path := filepath.Join(root, d.Name(), name)
			own := topic + "+" + strconv.Itoa(int(part))
			target, isTemp := atomicfile.TempTarget(name)
			if !isTemp && strings.Contains(name, ".tmp-") && strings.HasPrefix(name, ".") {
				// Named as earlier forklabs named them: .NAME.tmp-RANDOM.
				target, isTemp = strings.TrimPrefix(name[:strings.Index(name, ".tmp-")], "."), true
			}
			if isTemp && (strings.HasPrefix(target, own+"+") || strings.HasPrefix(target, own+".json")) {
				// atomicfile's temporary file of a write a kill cut short.
				if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return nil, err
				}
				continue
			}
			t, p, a, b, ok := ParseFileName(name)
			if ok && t == topic && p == part && d.Name() != StateDir {
				out = append(out, batchFile{path: path, first: a, last: b})
			}
		}
	}
	return out, nil
}

// writeResult says what writeFile did.
type writeResult int

const (
	written   writeResult = iota
	rewritten             // the file existed with the same bytes
	differing             // the file existed with other bytes: kept
)

// writeFile writes rows as the Parquet file path: encoded in memory, then a
// temporary file, fsync and rename. A file already at path is compared
// instead and never replaced. The caller syncs the directory.
func writeFile(path string, rows []schemas.SessionEvent) (writeResult, error) {
	var buf bytes.Buffer
	if err := agent.EncodeEvents(&buf, rows); err != nil {
		return 0, fmt.Errorf("encode %s: %w", path, err)
	}
	old, err := os.ReadFile(path)
	switch {
	case err == nil && bytes.Equal(old, buf.Bytes()):
		return rewritten, nil
	case err == nil:
		return differing, nil
	case !errors.Is(err, fs.ErrNotExist):
		return 0, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return 0, err
	}
	if err := atomicfile.WriteFile(path, buf.Bytes()); err != nil {
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	return written, nil
}
