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
// the file says how (done, or failed and why). An attempt whose file is
// still "running" but has not been touched for a lease is one whose
// worker stopped (killed, crashed, cut off from the storage): it counts as
// failed. A unit is retried until MaxAttempts attempts have failed, then
// written as error rows naming them.
//
// The records live on the shared storage, not in Kafka, because a worker
// that crashes cannot report its own failure: the next worker to get the
// unit finds the silent attempt there.

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

// failed reports whether the attempt failed, or stopped heartbeating, and
// why.
func (a attempt) failed(lease time.Duration, now time.Time) (bool, string) {
	switch {
	case a.State == attemptFailed:
		return true, a.Error
	case a.State == attemptRunning && now.Sub(a.beat) >= lease:
		return true, fmt.Sprintf("the worker stopped while running it (no heartbeat since %s)", a.beat.UTC().Format(time.RFC3339))
	}
	return false, ""
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
func failures(as []attempt, lease time.Duration, now time.Time) (int, []string) {
	var why []string
	for _, a := range as {
		if f, reason := a.failed(lease, now); f {
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
