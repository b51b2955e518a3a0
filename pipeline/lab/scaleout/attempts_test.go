package scaleout

import (
	"os"
	"strings"
	"testing"
	"time"
)

// An attempt heartbeats while it runs; one that stopped heartbeating for a
// lease counts as failed, naming its worker; one that failed says why; a
// finished or live one does not count.
func TestAttempts(t *testing.T) {
	dir := t.TempDir()
	lease := 200 * time.Millisecond
	live, err := startAttempt(dir, "c0-s000001", "w1-0", "s", lease)
	if err != nil {
		t.Fatal(err)
	}
	silent, _ := startAttempt(dir, "c0-s000001", "w2-0", "s", lease)
	silent.stop <- struct{}{} // the heartbeat goroutine ends: a killed worker
	failed, _ := startAttempt(dir, "c0-s000001", "w3-0", "s", lease)
	if err := failed.end(attemptFailed, "panic: boom (at world.go:9)"); err != nil {
		t.Fatal(err)
	}
	done, _ := startAttempt(dir, "c0-s000001", "w4-0", "s", lease)
	done.end(attemptDone, "")
	time.Sleep(3 * lease)
	as, err := readAttempts(dir, "c0-s000001")
	if err != nil || len(as) != 4 {
		t.Fatalf("%d attempts, %v", len(as), err)
	}
	now := time.Now()
	if !as[0].live(lease, now) || as[1].live(lease, now) {
		t.Fatalf("live: heartbeating %v, silent %v", as[0].live(lease, now), as[1].live(lease, now))
	}
	n, why := failures(as, lease, now)
	if n != 2 || !strings.HasPrefix(why[0], "attempt 1 (worker w2-0): the worker stopped while running it (no heartbeat since ") ||
		why[1] != "attempt 2 (worker w3-0): panic: boom (at world.go:9)" {
		t.Fatalf("failures %d: %q", n, why)
	}
	live.withdraw()
	if as, _ := readAttempts(dir, "c0-s000001"); len(as) != 3 {
		t.Fatalf("a withdrawn attempt left its record: %d records", len(as))
	}
	if as, err := readAttempts(dir, "c9-s000000"); err != nil || len(as) != 0 {
		t.Fatalf("attempts of a unit never tried: %v %v", as, err)
	}
	os.RemoveAll(dir)
}
