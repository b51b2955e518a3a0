// Package dirlock lets one process at a time own a directory: a sweep its
// output directory, a log service its data directory. The lock is an
// exclusive flock(2) on a file in the directory holding the owner's pid, so
// it is released when the process ends, however it ends.
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrLocked reports a directory another process owns.
var ErrLocked = errors.New("is in use by another process")

// Lock takes dir (creating it if needed) through the lock file name in it.
// If another process holds it, the error wraps ErrLocked and names that
// process's pid. The returned function releases the lock.
func Lock(dir, name string) (release func(), err error) {
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("%s exists and is not a directory", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%s cannot be created: %w", dir, unwrap(err))
	}
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s is not writable: %w", dir, unwrap(err))
	}
	if err := flock(f); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		holder := strings.TrimSpace(string(b))
		if holder == "" {
			holder = "?"
		}
		return nil, fmt.Errorf("%s %w (pid %s)", dir, ErrLocked, holder)
	}
	f.Truncate(0)
	f.WriteString(strconv.Itoa(os.Getpid()) + "\n")
	return func() {
		f.Truncate(0)
		funlock(f)
		f.Close()
	}, nil
}

func unwrap(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Exclusive takes an exclusive flock(2) on directory dir itself, waiting
// for another holder to release it, and returns the function that
// releases it. It leaves nothing in dir: it serialises short
// read-modify-write steps on a directory's bookkeeping files (the derived
// files of a results directory) among processes and goroutines alike. It
// does not nest: a holder that takes it again on the same directory waits
// for itself.
func Exclusive(dir string) (release func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, unwrap(err))
	}
	if err := flockWait(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() {
		funlock(f)
		f.Close()
	}, nil
}
