package sweep

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/parquet-go/parquet-go"
)

// ErrMismatch marks a results directory whose files or manifest differ
// from what the sweep wrote: an edited manifest, a file added, removed,
// truncated or changed. forklab exits 4 on it (docs/exit-status.md).
var ErrMismatch = errors.New("does not match its manifest")

// checksumOf returns the CRC-32C of m's JSON with its Checksum empty: the
// value its Checksum field holds.
func checksumOf(m Manifest) (string, error) {
	m.Checksum = ""
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%08x", crc32.Checksum(b, castagnoli)), nil
}

// legacyCost is the manifest's cost object as forklab wrote it before its
// keys were snake_case: world.Cost without json tags.
var legacyCost = regexp.MustCompile(`"cost":\{"steps":(-?[0-9]+),"tokens":(-?[0-9]+),"usd":([^,}]+),"seconds":([^,}]+)\}`)

// legacyChecksumOf is checksumOf over m's JSON with the cost object's keys
// spelled as manifests of this schema version spelled them until 2026-12
// ("Steps", "Tokens", "USD", "Seconds"): such a manifest, decoded (keys
// match regardless of case) and encoded again, checks against the checksum
// it was written with. Any other edit still fails.
func legacyChecksumOf(m Manifest) (string, error) {
	m.Checksum = ""
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	if len(legacyCost.FindAllIndex(b, -1)) != 1 {
		return "", errors.New("no cost object")
	}
	b = legacyCost.ReplaceAll(b, []byte(`"cost":{"Steps":$1,"Tokens":$2,"USD":$3,"Seconds":$4}`))
	return fmt.Sprintf("%08x", crc32.Checksum(b, castagnoli)), nil
}

// Verify checks that dir holds exactly the sweep its manifest m describes,
// and names the first difference (the error wraps ErrMismatch): the
// manifest's own checksum (a hand-edited manifest), its row counts against
// its file list and seed range, then every table file: present, of its
// recorded size, no Parquet file the manifest does not list. With full it
// also reads every file: its CRC-32C and, from its footer, its row count.
func Verify(dir string, m Manifest, full bool) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s %w: %s; rerun the sweep (or restore the files)", dir, ErrMismatch, fmt.Sprintf(format, args...))
	}
	want, err := checksumOf(m)
	if err != nil {
		return err
	}
	if m.Checksum != want {
		// A manifest of this schema version written before the cost
		// object's keys were snake_case checks against its own spelling.
		if legacy, err := legacyChecksumOf(m); err == nil && m.Checksum == legacy {
			want = legacy
		}
	}
	if m.Checksum != want {
		return bad("%s was edited (its checksum is %s, its content's %s)", ManifestName, m.Checksum, want)
	}
	rows := map[string]int64{}
	listed := map[string]FileInfo{}
	for _, f := range m.Files {
		rows[strings.Split(f.Path, "/")[0]] += f.Rows
		listed[f.Path] = f
	}
	for t, n := range m.Rows {
		if rows[t] != n {
			return bad("rows.%s is %d but its files hold %d", t, n, rows[t])
		}
	}
	if n := int64(m.Spec.Population().Len()) * int64(len(m.Configs)); m.Rows["tasks"] != n {
		return bad("%d task rows for %d runs × %d configurations", m.Rows["tasks"], m.Spec.Population().Len(), len(m.Configs))
	}
	for _, f := range m.Files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		fi, err := os.Stat(p)
		if err != nil {
			return bad("%s is missing", f.Path)
		}
		if fi.Size() != f.Bytes {
			return bad("%s has %d bytes, the manifest says %d", f.Path, fi.Size(), f.Bytes)
		}
		if !full {
			continue
		}
		crc, _, err := fileCRC(p)
		if err != nil {
			return err
		}
		if crc != f.CRC32C {
			return bad("%s has CRC-32C %s, the manifest says %s", f.Path, crc, f.CRC32C)
		}
		n, err := parquetRows(p)
		if err != nil {
			return bad("%s is not readable Parquet: %v", f.Path, err)
		}
		if n != f.Rows {
			return bad("%s holds %d rows, the manifest says %d", f.Path, n, f.Rows)
		}
	}
	var extra string
	for t := range rows {
		err := filepath.WalkDir(filepath.Join(dir, t), func(p string, d fs.DirEntry, err error) error {
			if err != nil || extra != "" {
				return err
			}
			if !d.IsDir() && filepath.Ext(p) == ".parquet" {
				rel, _ := filepath.Rel(dir, p)
				if _, ok := listed[filepath.ToSlash(rel)]; !ok {
					extra = filepath.ToSlash(rel)
				}
			}
			return nil
		})
		if err != nil {
			return bad("%v", err)
		}
	}
	if extra != "" {
		return bad("%s is not among its files", extra)
	}
	return nil
}

func parquetRows(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return 0, err
	}
	return f.NumRows(), nil
}

// Tables lists the tables of m's files, sorted.
func (m Manifest) Tables() []string {
	var ts []string
	for _, f := range m.Files {
		t := strings.Split(f.Path, "/")[0]
		if !slices.Contains(ts, t) {
			ts = append(ts, t)
		}
	}
	slices.Sort(ts)
	return ts
}

// VerifyContent checks every table file of m in dir against its recorded
// CRC-32C, reading each file once as a stream (several files at a time, one
// per CPU), and names the first that differs (the error wraps ErrMismatch).
// It is what report, sql, db and policy check, after Verify, every time
// they open a results directory, so that a file changed in place (same
// size) is never served: CRC-32C runs at several GB/s, so a sweep of
// 1,000,000 seeds (22 MB of Parquet) costs milliseconds (docs/bi.md gives
// the figures, make bench-sql measures them). A file removed or resized
// is Verify's to report.
func VerifyContent(dir string, m Manifest) error {
	errs := make([]error, len(m.Files))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(len(m.Files), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f := m.Files[i]
				crc, _, err := fileCRC(filepath.Join(dir, filepath.FromSlash(f.Path)))
				switch {
				case err != nil:
					errs[i] = fmt.Errorf("%s %w: %s cannot be read: %v; rerun the sweep (or restore the files)", dir, ErrMismatch, f.Path, err)
				case crc != f.CRC32C:
					errs[i] = fmt.Errorf("%s %w: %s has CRC-32C %s, the manifest says %s (changed since the sweep wrote it); rerun the sweep (or restore the files)", dir, ErrMismatch, f.Path, crc, f.CRC32C)
				}
			}
		}()
	}
	for i := range m.Files {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
