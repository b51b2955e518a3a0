// Package atomicfile writes files so that a reader — or a crash — sees the
// old content or the new, never a part: the data goes to a temporary file in
// the same directory, is synced, and is renamed over the name.
package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// File is a file being written; Commit puts it in place, Abort drops it.
type File struct {
	*os.File
	path string
	done bool
}

// ErrNotRegular reports a path that exists and is not a regular file (a
// symbolic link, a device, a directory, a pipe): forklab replaces only
// regular files.
var ErrNotRegular = errors.New("is not a regular file; forklab replaces only regular files")

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

// Create starts writing path: a temporary file ".NAME.tmp-*" beside it. It
// refuses a path that exists and is not a regular file (CheckReplaceable).
func Create(path string) (*File, error) {
	if err := CheckReplaceable(path); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, err
	}
	// CreateTemp makes the file private (0600); the result is an ordinary
	// file like the tables beside it.
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return &File{File: f, path: path}, nil
}

// Commit syncs and closes the file and renames it to its path.
func (f *File) Commit() error {
	f.done = true
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), f.path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// Abort closes and removes the temporary file unless Commit ran; it is safe
// to defer.
func (f *File) Abort() {
	if !f.done {
		f.done = true
		f.Close()
		os.Remove(f.Name())
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
