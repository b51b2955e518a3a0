package scaleout

import (
	"os"
	"testing"
	"time"
)

// An attempt heartbeats while it runs; one that stopped heartbeating for a
// lease is one whose worker vanished, which is not a failure of the unit;
// one that failed says why, and so does one whose process crashed
// (MarkCrashed, by the supervising process); a finished or live one does
// not count.
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
	if !as[1].vanished(lease, now) || as[0].vanished(lease, now) || as[2].vanished(lease, now) {
		t.Fatal("vanished: want only the silent attempt")
	}
	n, why := failures(as)
	if n != 1 || why[0] != "attempt 1 (worker w3-0): panic: boom (at world.go:9)" {
		t.Fatalf("failures %d: %q", n, why)
	}
	// The silent one's process crashed, as its supervisor saw: now it
	// failed, with the reason; a record already ended is left alone.
	if err := MarkCrashed(silent.path, "the worker process running it crashed (exit status 3): faulty: seed 5000: exiting"); err != nil {
		t.Fatal(err)
	}
	if err := MarkCrashed(done.path, "x"); err != nil {
		t.Fatal(err)
	}
	as, _ = readAttempts(dir, "c0-s000001")
	n, why = failures(as)
	if n != 2 || why[0] != "attempt 1 (worker w2-0): the worker process running it crashed (exit status 3): faulty: seed 5000: exiting" ||
		why[1] != "attempt 2 (worker w3-0): panic: boom (at world.go:9)" || as[3].State != attemptDone {
		t.Fatalf("after MarkCrashed: failures %d: %q; the done one is %s", n, why, as[3].State)
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
