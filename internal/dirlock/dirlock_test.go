package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new")
	release, err := Lock(dir, ".lock")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(dir, ".lock"); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("(pid %d)", os.Getpid())) {
		t.Fatalf("second lock: %v", err)
	}
	release()
	again, err := Lock(dir, ".lock")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again()
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	if _, err := Lock(file, ".lock"); err == nil || !strings.Contains(err.Error(), "exists and is not a directory") {
		t.Fatalf("a file: %v", err)
	}
}

// Exclusive waits for the holder, leaves nothing in the directory, and
// refuses a path that is not there.
func TestExclusive(t *testing.T) {
	dir := t.TempDir()
	release, err := Exclusive(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan struct{})
	go func() {
		r, err := Exclusive(dir)
		if err != nil {
			t.Error(err)
		} else {
			r()
		}
		close(got)
	}()
	select {
	case <-got:
		t.Fatal("a second Exclusive did not wait for the first")
	case <-time.After(100 * time.Millisecond):
	}
	release()
	<-got
	if es, _ := os.ReadDir(dir); len(es) != 0 {
		t.Errorf("Exclusive left %v", es)
	}
	if _, err := Exclusive(filepath.Join(dir, "no-such")); err == nil {
		t.Error("Exclusive of a missing directory succeeded")
	}
}
