// Package caplog opens the log files forklab writes — an external agent's
// standard error (agent-logs/agent-N.log), the processes forklab chaos
// starts (service.log, sink.log) — capped and rotated, so that a process
// writing without pause cannot fill a disk: once a file holds MaxMB
// megabytes (MiB) it is renamed NAME-TIMESTAMP.EXT beside itself and
// started afresh, and only the newest Backups rotated files are kept. One
// log thus takes at most (Backups+1) × MaxMB = 30 MiB. The rotation is
// gopkg.in/natefinch/lumberjack.v2's.
package caplog

import (
	"fmt"
	"os"
	"path/filepath"

	"gopkg.in/natefinch/lumberjack.v2"
)

// MaxMB and Backups are the cap: a file is rotated at MaxMB MiB, and
// Backups rotated files are kept.
const (
	MaxMB   = 10
	Backups = 2
)

// MaxBytes is the most one log takes on disk: the file and its backups.
const MaxBytes = (Backups + 1) * MaxMB << 20

// Open opens path to append to it (with trunc, afresh), capped and
// rotated. The file is created 0644, as the files beside it; its folder
// is made if needed. Write to the Logger from any goroutine; Close it
// once done. A single Write of more than MaxMB MiB fails.
func Open(path string, trunc bool) (*lumberjack.Logger, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("log directory: %w", err)
	}
	// lumberjack makes a new file 0600, and keeps the mode of one it
	// rotates: created here, it is an ordinary 0644 file.
	flag := os.O_CREATE | os.O_WRONLY
	if trunc {
		flag |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log: %w", err)
	}
	f.Close()
	return &lumberjack.Logger{Filename: path, MaxSize: MaxMB, MaxBackups: Backups}, nil
}
