// Package atomicfile writes files so that a reader — or a crash — sees the
// old content or the new, never a part: the data goes to a temporary file in
// the same directory, is synced, and is renamed over the name.
//
// It is the one way forklab writes a file a user names (sql --out, report
// --html, policy --out, log export, results.duckdb, manifests, ledgers):
//
//   - a path that exists and is not a regular file (a symbolic link, a
//     device node such as /dev/null, a directory, a named pipe) is refused
//     (ErrNotRegular), never replaced;
//   - an existing file is replaced only when the caller says so (Output
//     with overwrite; ErrExists otherwise);
//   - a refusal leaves nothing behind, and neither does a failure: the
//     temporary file is removed on Abort, on a failed Commit, and — for a
//     process ended by a signal — by Cleanup, which removes every
//     temporary file and directory still in flight (cmd/forklab calls it
//     on SIGINT and SIGTERM).
//
// Temporary files are named .BASE.forklab.tmp-RANDOM beside the final
// path: hidden, recognisable (IsTemp), and never ending with the final
// name's extension, so that a reader globbing *.parquet (the events view
// over a sink's folder) never opens one half-written.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// File is a file being written; Commit puts it in place, Abort drops it.
type File struct {
	*os.File
	path string
	done bool
	// noReplace: the final path must not exist when the file is renamed
	// there (Output without overwrite).
	noReplace bool
	// before, if set, runs just before the rename (Commit); an error
	// aborts the commit.
	before []func() error
	// after runs once Commit is over, whether it renamed or not.
	after []func()
}

// ErrNotRegular reports a path that exists and is not a regular file (a
// symbolic link, a device, a directory, a pipe): forklab replaces only
// regular files.
var ErrNotRegular = errors.New("is not a regular file; forklab replaces only regular files")

// ErrExists reports an output file that already exists when replacing it
// was not asked for (Output with overwrite false).
var ErrExists = errors.New("already exists")

// ErrBadOutput reports an output path that cannot be written: its folder
// is missing or takes no file.
var ErrBadOutput = errors.New("cannot write output")

// ErrInterrupted reports a temporary file asked for, or committed, after
// Cleanup ran: the process is ending on a signal.
var ErrInterrupted = errors.New("interrupted")

// CheckReplaceable reports path when it exists and is not a regular file
// (ErrNotRegular): a symlink or a device node must not be swapped for a
// regular file behind its owner's back.
func CheckReplaceable(path string) error {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode().IsRegular() {
		return nil
	}
	return fmt.Errorf("%s %w (it is a %s)", path, ErrNotRegular, kind(fi.Mode()))
}

func kind(m os.FileMode) string {
	switch {
	case m&os.ModeSymlink != 0:
		return "symbolic link"
	case m.IsDir():
		return "directory"
	case m&os.ModeDevice != 0:
		return "device"
	case m&os.ModeNamedPipe != 0:
		return "named pipe"
	case m&os.ModeSocket != 0:
		return "socket"
	}
	return "special file"
}

// tempInfix marks a temporary name: .BASE.forklab.tmp-RANDOM. It holds
// the infix the sweep's table files use (.NAME.tmp-RANDOM), so that one
// test finds both.
const tempInfix = ".forklab.tmp-"

// IsTemp says whether name (a base name) is a temporary file of this
// package: one a killed process may have left, never a finished file.
func IsTemp(name string) bool {
	_, ok := TempTarget(name)
	return ok
}

// TempTarget returns the base name of the file a temporary file named
// name was to become, and whether name is one of this package's temporary
// files (IsTemp): a process cleaning up after a killed writer of its own
// files (forklab log sink) finds them by it.
func TempTarget(name string) (string, bool) {
	i := strings.LastIndex(name, tempInfix)
	if !strings.HasPrefix(name, ".") || i < 2 {
		return "", false
	}
	return name[1:i], true
}

// Create starts writing path: a temporary file beside it. It replaces an
// existing regular file and refuses a path that exists and is not one
// (CheckReplaceable).
func Create(path string) (*File, error) {
	if err := CheckReplaceable(path); err != nil {
		return nil, err
	}
	return create(path)
}

// Output starts writing an output file a user named: it refuses a path
// that exists and is not a regular file (ErrNotRegular), an existing file
// unless overwrite (ErrExists, naming --overwrite), and a path whose
// folder cannot take a file (ErrBadOutput, with the reason). Nothing is
// left behind by a refusal.
func Output(path string, overwrite bool) (*File, error) {
	if err := CheckReplaceable(path); err != nil {
		return nil, err
	}
	if _, err := os.Lstat(path); err == nil && !overwrite {
		return nil, fmt.Errorf("output %s %w; pass --overwrite to replace it", path, ErrExists)
	}
	f, err := create(path)
	if err != nil {
		if errors.Is(err, ErrInterrupted) {
			return nil, err
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("%w %s: %v", ErrBadOutput, path, err)
	}
	f.noReplace = !overwrite
	return f, nil
}

func create(path string) (*File, error) {
	var f *os.File
	err := inFlight.add(func() (string, error) {
		var err error
		f, err = os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+tempInfix+"*")
		if err != nil {
			return "", err
		}
		return f.Name(), nil
	})
	if err != nil {
		return nil, err
	}
	// CreateTemp makes the file private (0600); the result is an ordinary
	// file like the tables beside it.
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		inFlight.remove(f.Name())
		return nil, err
	}
	return &File{File: f, path: path}, nil
}

// Path is the final path.
func (f *File) Path() string { return f.path }

// TempPath is the temporary file's path, for writers that open files by
// name (DuckDB's COPY).
func (f *File) TempPath() string { return f.Name() }

// Write writes b to the temporary file; an error names the final path
// ("write report.html: no space left on device"), not the temporary one.
func (f *File) Write(b []byte) (int, error) {
	n, err := f.File.Write(b)
	if err != nil {
		err = f.pathErr("write", err)
	}
	return n, err
}

// WriteString is Write for a string.
func (f *File) WriteString(s string) (int, error) { return f.Write([]byte(s)) }

// pathErr words err, an error on the temporary file, with the final path.
func (f *File) pathErr(op string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == f.Name() {
		return &fs.PathError{Op: op, Path: f.path, Err: pe.Err}
	}
	return err
}

// BeforeCommit adds a step Commit runs after the data is synced and just
// before the rename (registering the file as derived from a sweep,
// checking that the sweep is still the one read); its error aborts the
// commit, leaving path as it was.
func (f *File) BeforeCommit(step func() error) { f.before = append(f.before, step) }

// AfterCommit adds a step Commit runs when it is over, after the rename or
// its failure (releasing a lock a BeforeCommit step took, so that the
// check, the bookkeeping and the rename happen as one step).
func (f *File) AfterCommit(step func()) { f.after = append(f.after, step) }

// Commit syncs and closes the file and renames it to its path, then syncs
// the folder. On error the temporary file is gone and path is as it was.
func (f *File) Commit() error {
	if f.done {
		return errors.New("atomicfile: commit after commit or abort")
	}
	f.done = true
	defer func() {
		for _, step := range f.after {
			step()
		}
	}()
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		err = f.pathErr("write", err)
	}
	for _, step := range f.before {
		if err == nil {
			err = step()
		}
	}
	if err == nil {
		err = inFlight.commit(f.Name(), func() error {
			// A file swapped in meanwhile is not replaced either.
			if err := CheckReplaceable(f.path); err != nil {
				return err
			}
			if f.noReplace {
				if err := renameNoReplace(f.Name(), f.path); err != nil {
					if errors.Is(err, ErrExists) {
						return fmt.Errorf("output %s %w (it appeared while forklab wrote it); pass --overwrite to replace it", f.path, ErrExists)
					}
					return err
				}
				return nil
			}
			return os.Rename(f.Name(), f.path)
		})
	}
	if err != nil {
		inFlight.remove(f.Name())
		return err
	}
	SyncDir(filepath.Dir(f.path))
	return nil
}

// Abort closes and removes the temporary file unless Commit ran; it is safe
// to defer.
func (f *File) Abort() {
	if !f.done {
		f.done = true
		f.Close()
		inFlight.remove(f.Name())
	}
}

// WriteFile writes data to path atomically.
func WriteFile(path string, data []byte) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.Commit()
}

// SyncDir flushes dir's entries to disk: after a rename into dir (Commit,
// WriteFile), the rename itself is durable only once its directory is
// synced (fsync(2) of the directory, as POSIX requires).
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// TempName reserves a fresh temporary name beside path for a writer that
// creates the file itself (DuckDB's ATTACH), tracked for Cleanup with the
// extra suffixes given (".wal" for DuckDB's write-ahead log). release
// removes whatever exists under those names and stops tracking them; it
// is safe to call after the file was renamed away.
func TempName(path string, suffixes ...string) (name string, release func(), err error) {
	f, err := create(path)
	if err != nil {
		return "", nil, err
	}
	f.Close()
	name = f.Name()
	os.Remove(name)
	for _, s := range suffixes {
		inFlight.track(name + s)
	}
	return name, func() {
		inFlight.remove(name)
		for _, s := range suffixes {
			inFlight.remove(name + s)
		}
	}, nil
}

// TempDir creates a temporary directory in dir (the system's temporary
// folder when dir is ""), tracked for Cleanup; remove removes it and all
// it holds.
func TempDir(dir, pattern string) (path string, remove func(), err error) {
	err = inFlight.add(func() (string, error) {
		var err error
		path, err = os.MkdirTemp(dir, pattern)
		return path, err
	})
	if err != nil {
		return "", nil, err
	}
	return path, func() { inFlight.remove(path) }, nil
}

// Cleanup removes every temporary file and directory of this package that
// is still in flight, and makes later Create, Output, TempName and TempDir
// calls fail with ErrInterrupted: the process is about to end on a signal,
// and nothing half-written may stay. It is safe to call from any
// goroutine, more than once.
func Cleanup() { inFlight.cleanup() }

// registry tracks the temporary paths in flight.
type registry struct {
	mu     sync.Mutex
	paths  map[string]bool
	closed bool
}

var inFlight = &registry{paths: map[string]bool{}}

// add runs mk, which creates a temporary path, and tracks it; it fails
// without running mk once cleanup ran.
func (r *registry) add(mk func() (string, error)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrInterrupted
	}
	p, err := mk()
	if err != nil {
		return err
	}
	r.paths[p] = true
	return nil
}

func (r *registry) track(p string) {
	r.mu.Lock()
	r.paths[p] = true
	r.mu.Unlock()
}

// commit runs rename, which moves temporary path p away, unless cleanup
// removed it; p is no longer tracked after.
func (r *registry) commit(p string, rename func() error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrInterrupted
	}
	if err := rename(); err != nil {
		return err
	}
	delete(r.paths, p)
	return nil
}

// remove removes p (and all under it) and stops tracking it.
func (r *registry) remove(p string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	os.RemoveAll(p)
	delete(r.paths, p)
}

func (r *registry) cleanup() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for p := range r.paths {
		os.RemoveAll(p)
		delete(r.paths, p)
	}
}

// renameIfAbsent renames from to to unless to exists (ErrExists); the
// check and the rename are two steps.
func renameIfAbsent(from, to string) error {
	if _, err := os.Lstat(to); err == nil {
		return ErrExists
	}
	return os.Rename(from, to)
}

// reset reopens the registry after cleanup (tests).
func (r *registry) reset() {
	r.mu.Lock()
	r.closed = false
	r.mu.Unlock()
}
