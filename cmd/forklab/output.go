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
	"github.com/spf13/cobra"
)

// checkOutput refuses, before anything runs, an output path forklab must
// not write: one inside a results directory's own files (sweep.CheckOutput;
// own names the entries the command writes itself), one that is not a
// regular file (a symbolic link, a device node, a directory), or an
// existing file without overwrite. The error is bad input (exit 2) and
// names the path and the flag that allows replacing it, or where to write
// instead; nothing is created.
func checkOutput(path string, overwrite bool, own ...string) error {
	if err := sweep.CheckOutput(path, own...); err != nil {
		return asInput(err)
	}
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

// writableDir makes dir (and its parents) if needed and checks that it
// takes a new file: a temporary one, created and removed. The error names
// dir and the reason (read-only file system, permission denied).
func writableDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%w %s: %v", atomicfile.ErrBadOutput, dir, unwrapPathErr(err))
	}
	f, err := os.CreateTemp(dir, ".forklab-probe-*")
	if err != nil {
		return fmt.Errorf("%w %s: %v", atomicfile.ErrBadOutput, dir, unwrapPathErr(err))
	}
	f.Close()
	return os.Remove(f.Name())
}

// unwrapPathErr is the reason inside a *fs.PathError, or err.
func unwrapPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
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

// outputFlags are the flags that name a file or directory a command
// writes: its output, a report page, logs, a broker's data, a profile, an
// offset. guardOutputs checks each one's value on every command.
var outputFlags = []string{"out", "html", "out-dir", "junit", "log-dir", "data-dir", "cpuprofile", "addr-file", "offset-file", "sink-out"}

// guardOutputs makes every command of c and below refuse, before it runs,
// an output flag (outputFlags) that names one of a results directory's own
// files or partitions (sweep.CheckOutput): the one guard every writer
// goes through, whatever the command, with or without --overwrite. A new
// writer's flag joins outputFlags.
func guardOutputs(c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			for _, name := range outputFlags {
				f := cmd.Flags().Lookup(name)
				if f == nil || !f.Changed || f.Value.String() == "" {
					continue
				}
				if err := sweep.CheckOutput(f.Value.String()); err != nil {
					return asInput(fmt.Errorf("--%s: %w", name, err))
				}
			}
			return run(cmd, args)
		}
	}
	for _, s := range c.Commands() {
		guardOutputs(s)
	}
}
