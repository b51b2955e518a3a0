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
	"sort"
	"strings"
	"sync"

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

// Logger is a capped, rotated log file: lumberjack's, whose removal of
// old backups runs in a goroutine of its own and so lagged behind a
// writer that never paused (17 backups of 10 MiB beside one agent's log
// in a second, left on disk when the process exited): after every Write
// that rotated the file and on Close, Logger removes all but the newest
// Backups itself, so the cap holds whenever a Write has returned.
type Logger struct {
	mu   sync.Mutex
	lj   *lumberjack.Logger
	path string
	size int64
}

// Open opens path to append to it (with trunc, afresh), capped and
// rotated. The file is created 0644, as the files beside it; its folder
// is made if needed. Write to the Logger from any goroutine; Close it
// once done. A single Write of more than MaxMB MiB fails.
func Open(path string, trunc bool) (*Logger, error) {
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
	fi, err := f.Stat()
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("log: %w", err)
	}
	return &Logger{lj: &lumberjack.Logger{Filename: path, MaxSize: MaxMB, MaxBackups: Backups}, path: path, size: fi.Size()}, nil
}

// Write appends b, rotating the file first when b would take it past
// MaxMB MiB (and then removing the backups beyond Backups).
func (l *Logger) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rotates := l.size+int64(len(b)) > MaxMB<<20
	n, err := l.lj.Write(b)
	if rotates {
		l.size = int64(n)
		l.prune()
	} else {
		l.size += int64(n)
	}
	return n, err
}

// Close closes the file and removes the backups beyond Backups.
func (l *Logger) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.lj.Close()
	l.prune()
	return err
}

// prune removes the rotated files of l beyond the newest Backups:
// lumberjack names them NAME-TIMESTAMP.EXT, which sort by time.
func (l *Logger) prune() {
	ext := filepath.Ext(l.path)
	prefix := strings.TrimSuffix(filepath.Base(l.path), ext) + "-"
	ents, err := os.ReadDir(filepath.Dir(l.path))
	if err != nil {
		return
	}
	var backups []string
	for _, e := range ents {
		if n := e.Name(); !e.IsDir() && strings.HasPrefix(n, prefix) && strings.HasSuffix(n, ext) && n != filepath.Base(l.path) {
			backups = append(backups, n)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(backups)))
	for i := Backups; i < len(backups); i++ {
		os.Remove(filepath.Join(filepath.Dir(l.path), backups[i])) // lumberjack's own removal may have come first
	}
}
