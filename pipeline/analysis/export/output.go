package export

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrExists reports an output file that already exists when replacing it
// was not asked for.
var ErrExists = errors.New("already exists")

// ErrBadOutput reports an output path that cannot be written: a
// directory, a missing parent folder, no permission.
var ErrBadOutput = errors.New("cannot write output")

// Output is a file being written under a temporary name in the folder of
// its final path; Commit renames it into place, Abort removes it. Readers
// of the final path never see a half-written file.
type Output struct {
	path string
	f    *os.File
}

// CreateOutput starts writing path. It fails with an error wrapping
// ErrExists when path exists and overwrite is false, and with one wrapping
// ErrBadOutput when path is a directory or its folder cannot take a file.
// The temporary file is named .forklab-*-BASE, keeping the final name's
// extensions (DuckDB picks compression from them: .csv.gz is gzipped).
func CreateOutput(path string, overwrite bool) (*Output, error) {
	if fi, err := os.Stat(path); err == nil {
		if fi.IsDir() {
			return nil, fmt.Errorf("%w: %s is a directory", ErrBadOutput, path)
		}
		if !overwrite {
			return nil, fmt.Errorf("output %s %w; pass --overwrite to replace it", path, ErrExists)
		}
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".forklab-*-"+filepath.Base(path))
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("%w %s: %v", ErrBadOutput, path, err)
	}
	return &Output{path: path, f: f}, nil
}

// File is the open temporary file.
func (o *Output) File() *os.File { return o.f }

// Path is the final path.
func (o *Output) Path() string { return o.path }

// TempPath is the temporary file's path, for writers that open files by
// name (DuckDB's COPY).
func (o *Output) TempPath() string { return o.f.Name() }

// Commit flushes the temporary file to disk, makes it readable by others
// (0644) and renames it to the final path.
func (o *Output) Commit() error {
	err := o.f.Sync()
	if cerr := o.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(o.f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(o.f.Name(), o.path)
	}
	if err != nil {
		os.Remove(o.f.Name())
		return fmt.Errorf("write %s: %w", o.path, err)
	}
	return nil
}

// Abort closes and removes the temporary file; the final path is left as
// it was. It is safe to call after Commit (it does nothing then).
func (o *Output) Abort() {
	o.f.Close()
	os.Remove(o.f.Name())
}
