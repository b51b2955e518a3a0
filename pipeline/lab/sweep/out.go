package sweep

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/forklab/forklab/internal/atomicfile"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/forklab/forklab/schemas"
)

// ManifestName is the file that marks a finished results directory.
const ManifestName = "manifest.json"

// Manifest records how a results directory was made and what it holds.
type Manifest struct {
	ForklabVersion string           `json:"forklab_version"`
	SchemaVersion  int              `json:"schema_version"`
	Spec           Spec             `json:"spec"`
	Configs        []Config         `json:"configs"`
	Rows           map[string]int64 `json:"rows"`
	Files          map[string]int   `json:"files"`
	StartedAt      time.Time        `json:"started_at"`
	FinishedAt     time.Time        `json:"finished_at"`
}

// ErrFinished reports an output directory that already holds a finished
// sweep.
var ErrFinished = errors.New("holds a finished sweep")

// ErrNotResults reports a directory that is not a finished results
// directory.
var ErrNotResults = errors.New("not a finished results directory")

// Prepare makes dir ready to receive a sweep. A directory that holds a
// finished sweep (a manifest), exported events, a results.duckdb or files
// forklab did not write is refused unless overwrite is set, so that a wrong
// --out never loses anyone's files; an empty directory or one an interrupted
// sweep left is used as it is. With overwrite it first removes the manifest
// (so an interrupted overwrite never looks finished), then forklab's folders
// and files — the tables, events/, results.duckdb — and keeps anything else.
// It creates the table folders and checks that dir is writable. Errors name
// the directory and what to do.
func Prepare(dir string, overwrite bool) error {
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return fmt.Errorf("output %s exists and is not a directory", dir)
	}
	manifest := filepath.Join(dir, ManifestName)
	if _, err := os.Stat(manifest); err == nil {
		if !overwrite {
			return fmt.Errorf("output %s %w (%s); pass --overwrite to replace it or choose another --out", dir, ErrFinished, ManifestName)
		}
		if err := os.Remove(manifest); err != nil {
			return fmt.Errorf("output %s: remove old manifest: %w", dir, err)
		}
	}
	if !overwrite {
		if foreign, err := foreignEntry(dir); err != nil {
			return fmt.Errorf("output %s: %w", dir, err)
		} else if foreign != "" {
			return fmt.Errorf("output %s is not empty and is not an unfinished forklab sweep (it holds %s); choose an empty or new --out, or pass --overwrite to replace forklab's folders in it", dir, foreign)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("output %s cannot be created: %w", dir, unwrapPath(err))
	}
	probe, err := os.CreateTemp(dir, ".forklab-write-test-*")
	if err != nil {
		return fmt.Errorf("output %s is not writable: %w", dir, unwrapPath(err))
	}
	probe.Close()
	os.Remove(probe.Name())
	// Clear forklab's own folders of an earlier or interrupted run, with
	// what was derived from that run: its DuckDB database and the session
	// events exported beside it.
	for _, t := range append([]string{schemas.ConfigsTable, "events"}, schemas.Tables...) {
		td := filepath.Join(dir, t)
		if err := os.RemoveAll(td); err != nil {
			return fmt.Errorf("output %s: remove old table folder: %w", td, unwrapPath(err))
		}
		if t == "events" {
			continue
		}
		if err := os.MkdirAll(td, 0o755); err != nil {
			return fmt.Errorf("output %s: %w", td, unwrapPath(err))
		}
	}
	if err := os.Remove(filepath.Join(dir, "results.duckdb")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("output %s: remove old results.duckdb: %w", dir, err)
	}
	return nil
}

// partFile matches the files a sweep writes into its table folders, and
// hiveDir the partition folders.
var (
	partFile = regexp.MustCompile(`^(\.?part-\d+\.parquet(\.tmp.*)?|\.?configs\.parquet(\.tmp.*)?)$`)
	hiveDir  = regexp.MustCompile(`^(config_id|fork_step)=\d+$`)
)

// foreignEntry returns the first entry of dir that an interrupted sweep
// would not have left ("" if none, or if dir does not exist).
func foreignEntry(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	tables := map[string]bool{schemas.ConfigsTable: true}
	for _, t := range schemas.Tables {
		tables[t] = true
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == LockName || strings.HasPrefix(name, ".forklab-write-test-"):
		case tables[name] && e.IsDir():
			var found string
			err := filepath.WalkDir(filepath.Join(dir, name), func(p string, d fs.DirEntry, err error) error {
				if err != nil || found != "" {
					return err
				}
				rel, _ := filepath.Rel(dir, p)
				switch {
				case p == filepath.Join(dir, name):
				case d.IsDir() && hiveDir.MatchString(d.Name()):
				case !d.IsDir() && partFile.MatchString(d.Name()):
				default:
					found = rel
				}
				return nil
			})
			if err != nil {
				return "", err
			}
			if found != "" {
				return found, nil
			}
		default:
			return name, nil
		}
	}
	return "", nil
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// ReadManifest reads dir's manifest, failing with ErrNotResults when there is
// none.
func ReadManifest(dir string) (Manifest, error) {
	var m Manifest
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return m, fmt.Errorf("%s is a file, not a results directory: %w", dir, ErrNotResults)
	}
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if errors.Is(err, fs.ErrNotExist) {
		if fi, serr := os.Stat(dir); serr != nil || !fi.IsDir() {
			return m, fmt.Errorf("%s does not exist or is not a directory: %w", dir, ErrNotResults)
		}
		return m, fmt.Errorf("%s has no %s: it is %w (an unfinished sweep, or not a sweep's output)", dir, ManifestName, ErrNotResults)
	}
	if err != nil {
		return m, fmt.Errorf("read manifest: %w", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%s/%s is corrupt: %v: %w", dir, ManifestName, err, ErrNotResults)
	}
	return m, nil
}

// writeFileAtomic writes the manifest (see package atomicfile).
func writeFileAtomic(path string, b []byte) error { return atomicfile.WriteFile(path, b) }

// syncDir flushes a directory's entries (renames) to disk.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
