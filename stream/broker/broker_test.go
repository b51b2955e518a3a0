package broker

import (
	"errors"
	"strings"
	"testing"

	"github.com/forklab/forklab/internal/dirlock"
)

// A second broker on the same data directory is refused: both would number
// records from the same offsets.
func TestDataDirIsExclusive(t *testing.T) {
	dir := t.TempDir()
	b, err := Start(Config{DataDir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Start(Config{DataDir: dir, NoSync: true})
	if !errors.Is(err, dirlock.ErrLocked) || !strings.Contains(err.Error(), "stop the other forklab log serve") {
		t.Fatalf("second broker: %v", err)
	}
	b.Close()
	b2, err := Start(Config{DataDir: dir, NoSync: true})
	if err != nil {
		t.Fatalf("after Close: %v", err)
	}
	b2.Close()
}
