package scaleout

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/forklab/forklab/internal/atomicfile"
)

// Attempts at a unit are recorded in the staging directory, beside the
// unit ledger (sweep.Staging.StateDir("attempts")/UNIT/), one file per
// attempt, named by its start time and worker. The worker running an
// attempt touches its file every lease/4 (the heartbeat); when it ends,
// the file says how: done, or failed and why — the unit's error (a
// panic, an agent that crashed or timed out), or, written by forklab
// worker's supervising process, the crash of the member process that ran
// it (MarkCrashed). A unit is retried until MaxAttempts attempts have
// failed, then written as error rows naming them.
//
// An attempt whose file is still "running" but has not been touched for a
// lease is one whose worker vanished as a whole (SIGKILLed, its machine
// lost or preempted, cut off from the storage): the unit is run again,
// and that attempt is not counted as failed — a worker's disappearance
// says nothing about the unit. A unit that crashes the process running
// it is told apart by the supervisor, which outlives the member process
// (docs/scale-out.md, "Attempts, leases, poison units").
//
// The records live on the shared storage, not in Kafka, because a process
// that crashes cannot report its own failure: its supervisor records it
// there, and the next worker to get the unit finds it.

// attemptsDir is the StateDir of the attempt records.
const attemptsDir = "attempts"

// Attempt states.
const (
	attemptRunning = "running"
	attemptFailed  = "failed"
	attemptDone    = "done"
)

// attempt is one attempt's record.
type attempt struct {
	Worker  string    `json:"worker"`
	Sweep   string    `json:"sweep"`
	Started time.Time `json:"started"`
	State   string    `json:"state"`
	Error   string    `json:"error,omitempty"`
	Ended   time.Time `json:"ended,omitzero"`

	// beat is the file's modification time: the last heartbeat.
	beat time.Time
}

// live reports whether the attempt is running with a heartbeat younger
// than lease.
func (a attempt) live(lease time.Duration, now time.Time) bool {
	return a.State == attemptRunning && now.Sub(a.beat) < lease
}

// failed reports whether the attempt failed, and why. An attempt that
// stopped heartbeating (its worker vanished) did not fail: see vanished.
func (a attempt) failed() (bool, string) {
	return a.State == attemptFailed, a.Error
}

// vanished reports whether the attempt's worker vanished while running it:
// still "running", no heartbeat for a lease.
func (a attempt) vanished(lease time.Duration, now time.Time) bool {
	return a.State == attemptRunning && now.Sub(a.beat) >= lease
}

// readAttempts reads the attempt records of unit id in the attempts
// folder dir, oldest first.
func readAttempts(dir, id string) ([]attempt, error) {
	udir := filepath.Join(dir, id)
	es, err := os.ReadDir(udir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []attempt
	for _, e := range es {
		if !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(udir, e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			continue // replaced as we looked
		}
		var a attempt
		if json.Unmarshal(b, &a) != nil {
			continue
		}
		if fi, err := os.Stat(p); err == nil {
			a.beat = fi.ModTime()
		}
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Started.Before(out[j].Started) })
	return out, nil
}

// failures counts the failed attempts among as and lists why, numbered.
func failures(as []attempt) (int, []string) {
	var why []string
	for _, a := range as {
		if f, reason := a.failed(); f {
			why = append(why, fmt.Sprintf("attempt %d (worker %s): %s", len(why)+1, a.Worker, reason))
		}
	}
	return len(why), why
}

// running is an attempt in progress: its record, heartbeating.
type running struct {
	path string
	a    attempt
	stop chan struct{}
	wg   sync.WaitGroup
}

// startAttempt records an attempt by worker at unit id and heartbeats it
// every lease/4 until end.
func startAttempt(dir, id, worker, sweepID string, lease time.Duration) (*running, error) {
	udir := filepath.Join(dir, id)
	if err := os.MkdirAll(udir, 0o755); err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	r := &running{
		path: filepath.Join(udir, fmt.Sprintf("%d-%s.json", now.UnixNano(), worker)),
		a:    attempt{Worker: worker, Sweep: sweepID, Started: now, State: attemptRunning},
		stop: make(chan struct{}),
	}
	if err := r.write(); err != nil {
		return nil, err
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := time.NewTicker(max(lease/4, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-r.stop:
				return
			case <-t.C:
				now := time.Now()
				os.Chtimes(r.path, now, now)
			}
		}
	}()
	return r, nil
}

func (r *running) write() error {
	b, err := json.Marshal(r.a)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(r.path, b)
}

// end stops the heartbeat and records how the attempt ended: done, or
// failed with reason.
func (r *running) end(state, reason string) error {
	close(r.stop)
	r.wg.Wait()
	r.a.State, r.a.Error, r.a.Ended = state, reason, time.Now().UTC()
	return r.write()
}

// withdraw stops the heartbeat and removes the record: the attempt was
// given up for a reason that is not the unit's (the worker was stopped,
// the output could not be written).
func (r *running) withdraw() {
	close(r.stop)
	r.wg.Wait()
	os.Remove(r.path)
}

// MarkCrashed records that the attempt whose record is at path failed
// because the process running it ended (reason: how, and its last words),
// if the record still says running: forklab worker's supervising process
// calls it when a member process it started dies mid-unit.
func MarkCrashed(path, reason string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var a attempt
	if err := json.Unmarshal(b, &a); err != nil {
		return fmt.Errorf("attempt record %s: %w", path, err)
	}
	if a.State != attemptRunning {
		return nil
	}
	r := &running{path: path, a: a}
	r.a.State, r.a.Error, r.a.Ended = attemptFailed, reason, time.Now().UTC()
	return r.write()
}
