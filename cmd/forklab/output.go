package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/forklab/forklab/internal/atomicfile"
	"github.com/forklab/forklab/pipeline/analysis/export"
	"github.com/forklab/forklab/pipeline/lab/sweep"
)

// checkOutput refuses, before anything runs, an output path forklab must
// not write: one that is not a regular file (a symbolic link, a device
// node, a directory), or an existing file without overwrite. The error is
// bad input (exit 2) and names the path and the flag that allows
// replacing it; nothing is created.
func checkOutput(path string, overwrite bool) error {
	if err := atomicfile.CheckReplaceable(path); err != nil {
		return asInput(err)
	}
	if _, err := os.Lstat(path); err == nil && !overwrite {
		return asInput(fmt.Errorf("output %s %w; pass --overwrite to replace it", path, atomicfile.ErrExists))
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return asInput(fmt.Errorf("output %s: %w", path, err))
	}
	return nil
}

// createHTML starts writing the page an --html flag names, nil for "":
// refused as bad input, nothing created, when the path lies among a
// results directory's own files (sweep.CheckOutput), is not a regular
// file, or exists without overwrite. The caller commits or aborts it.
func createHTML(path string, overwrite bool) (*export.Output, error) {
	if path == "" {
		return nil, nil
	}
	if err := sweep.CheckOutput(path); err != nil {
		return nil, asInput(fmt.Errorf("--html: %w", err))
	}
	out, err := export.CreateOutput(path, overwrite)
	if err != nil {
		return nil, asInput(fmt.Errorf("--html: %w", err))
	}
	return out, nil
}

// isDir says whether path is a directory (following a symbolic link).
func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// mkdirAll makes dir and its missing parents; undo removes the topmost
// folder it made (with all in it), so that a command that fails after it
// leaves no trace. undo does nothing when dir existed.
func mkdirAll(dir string) (undo func(), err error) {
	top := ""
	for d := dir; ; {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		top = d
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		if top != "" {
			os.RemoveAll(top)
		}
		return func() {}, err
	}
	return func() {
		if top != "" {
			os.RemoveAll(top)
		}
	}, nil
}
