package caplog

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// A writer that never pauses rotates the file many times over; whenever a
// Write has returned, and after Close, only the file and the newest
// Backups rotated files are left (lumberjack's own removal runs in a
// goroutine and left 17 backups of one agent's log behind).
func TestCapHoldsAfterEveryRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agent-1.log")
	l, err := Open(path, false)
	if err != nil {
		t.Fatal(err)
	}
	// A file of another log beside it, whose name shares a prefix, is not
	// this log's backup.
	other := filepath.Join(dir, "agent-10-2000-01-01T00-00-00.000.log")
	if err := os.WriteFile(other, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	for i := range 8 * MaxMB {
		if _, err := l.Write(chunk); err != nil {
			t.Fatal(err)
		}
		if n := files(t, dir); n > Backups+2 {
			t.Fatalf("after %d MiB: %d files, want at most %d (and the other log's)", i+1, n, Backups+1)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := files(t, dir); n != Backups+2 {
		t.Errorf("after Close: %d files, want %d (the log, %d backups, the other log's)", n, Backups+2, Backups)
	}
	var total int64
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		fi, _ := e.Info()
		total += fi.Size()
	}
	if total > MaxBytes+1 {
		t.Errorf("%d bytes on disk, want at most %d", total, MaxBytes)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("the other log's file: %v", err)
	}
}

func files(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
