package agentproc

import (
	"errors"
	"fmt"
	"io/fs"
	"sync"

	"github.com/forklab/forklab/internal/caplog"
)

// An agent process's log file (agent-N.log) is capped and rotated
// (internal/caplog): once it holds LogMaxMB megabytes (MiB) it is renamed
// agent-N-TIMESTAMP.log beside itself and started afresh, and only the
// newest LogBackups rotated files are kept. A process slot's log thus
// takes at most (LogBackups+1) × LogMaxMB MiB, 30 MiB, however much its
// processes write (docs/agent-protocol.md).
const (
	LogMaxMB   = caplog.MaxMB
	LogBackups = caplog.Backups
)

// HeldBytes bounds what is held of a process's standard error before its
// log file is known (Config.HoldStderr): the latest HeldBytes bytes are
// kept and written to the file once it is, the rest counted as dropped.
const HeldBytes = 64 << 10

// logFile is one open log file, shared by every relay writing to its path
// (the processes a slot has had across restarts), so that one writer
// counts its size and rotates it.
type logFile struct {
	path string
	lj   *caplog.Logger
	refs int
}

var logFiles = struct {
	sync.Mutex
	m map[string]*logFile
}{m: map[string]*logFile{}}

// openLog opens path for appending (or, with trunc and no other writer,
// afresh), capped and rotated as LogMaxMB and LogBackups say. Close it
// once done.
func openLog(path string, trunc bool) (*logFile, error) {
	logFiles.Lock()
	defer logFiles.Unlock()
	if l := logFiles.m[path]; l != nil {
		l.refs++
		return l, nil
	}
	lj, err := caplog.Open(path, trunc)
	if err != nil {
		return nil, fmt.Errorf("agent %w", err)
	}
	l := &logFile{path: path, refs: 1, lj: lj}
	logFiles.m[path] = l
	return l, nil
}

// Write appends b to the file, rotating it first if b would take it past
// LogMaxMB.
func (l *logFile) Write(b []byte) (int, error) {
	n, err := l.lj.Write(b)
	if err != nil {
		var pe *fs.PathError
		if !errors.As(err, &pe) {
			err = fmt.Errorf("agent log %s: %w", l.path, err)
		}
	}
	return n, err
}

// Close releases the file; the last writer's Close closes it.
func (l *logFile) Close() error {
	logFiles.Lock()
	defer logFiles.Unlock()
	if l.refs--; l.refs > 0 {
		return nil
	}
	delete(logFiles.m, l.path)
	return l.lj.Close()
}

// held is where a process's standard error waits for its log file: the
// latest HeldBytes bytes, and how many came before them.
type held struct {
	buf     []byte
	dropped int64
}

func (h *held) Write(b []byte) (int, error) {
	h.buf = append(h.buf, b...)
	if over := len(h.buf) - HeldBytes; over > 0 {
		h.dropped += int64(over)
		h.buf = append(h.buf[:0], h.buf[over:]...)
	}
	return len(b), nil
}
