package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
