package scaleout_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/forklab/forklab/pipeline/lab/scaleout"
	"github.com/forklab/forklab/pipeline/lab/sweep"
)

// The environment of the worker process TestStepKillHelper runs.
const (
	envKillAt  = "SCALEOUT_TEST_KILL_AT"
	envBrokers = "SCALEOUT_TEST_BROKERS"
	envQueue   = "SCALEOUT_TEST_QUEUE"
)

// TestStepKillHelper is not a test: run by TestKillBetweenSteps as a
// process of its own, it is a worker of one member that SIGKILLs itself
// right after the named step of the first unit it runs.
func TestStepKillHelper(t *testing.T) {
	at := os.Getenv(envKillAt)
	if at == "" {
		t.Skip("the worker process of TestKillBetweenSteps")
	}
	q := scaleout.Queue{Brokers: strings.Split(os.Getenv(envBrokers), ","), Name: os.Getenv(envQueue), Partitions: 4}
	w, err := scaleout.NewWorker(context.Background(), scaleout.WorkerConfig{Queue: q, ID: "doomed", Parallel: 1,
		SessionTimeout: 6 * time.Second, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	scaleout.SetStepHook(w, func(s scaleout.Step) {
		if string(s) == at {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	})
	w.Run(context.Background())
	t.Fatal("the worker ended without reaching step " + at)
}

// The docs promise a unit's steps on a worker in this order: the record
// fetched, the attempt recorded, the unit's files and ledger entry
// written, the unit reported done, and only then the record's offset
// committed. A worker SIGKILLed right after each step (a process of its
// own, on the first unit it takes) leaves its unit to a healthy worker
// started after it: within a short deadline the sweep completes with the
// single process's files; the unit is neither lost (a worker that
// committed first would lose it, and the sweep would never end) nor
// counted twice (the coordinator's 12 units, the manifest's rows), and the
// kill is not a failed attempt (--max-attempts 1: it would be error rows).
// The healthy worker runs the unit again when the killed one had not
// written it, finds it finished when it had, and never sees it when its
// offset was committed.
func TestKillBetweenSteps(t *testing.T) {
	brokers := cluster(t, 1)
	spec := smallUnits()
	single := tableFiles(t, singleProcess(t, spec))
	r, err := spec.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		step          scaleout.Step
		units, again  int64
		vanished, ran bool
	}{
		{scaleout.StepFetched, 12, 0, false, false},
		{scaleout.StepAttempt, 12, 0, true, false},
		{scaleout.StepWritten, 11, 1, false, true},
		{scaleout.StepReported, 11, 1, false, true},
		{scaleout.StepCommitted, 11, 0, false, true},
	} {
		t.Run(string(c.step), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			q := scaleout.Queue{Brokers: brokers, Name: "steps-" + string(c.step), Partitions: 4}
			out := filepath.Join(t.TempDir(), "out")
			type result struct {
				res  sweep.Result
				last scaleout.Status
				err  error
			}
			done := make(chan result, 1)
			go func() {
				var last scaleout.Status
				res, err := scaleout.Coordinate(ctx, r, scaleout.CoordinatorConfig{Queue: q, Out: out, Version: "test", MaxAttempts: 1,
					Lease: 2 * time.Second, Progress: func(s scaleout.Status) { last = s }})
				done <- result{res, last, err}
			}()
			doomed := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestStepKillHelper$")
			doomed.Env = append(os.Environ(), envKillAt+"="+string(c.step), envBrokers+"="+strings.Join(brokers, ","), envQueue+"="+q.Name)
			b, err := doomed.CombinedOutput()
			if ws, ok := doomed.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("the worker to kill at %s ended with %v, not SIGKILL: %s", c.step, err, b)
			}
			w, errc := runWorker(t, ctx, q, "healthy", nil)
			var got result
			select {
			case got = <-done:
			case <-ctx.Done():
				t.Fatalf("killed after %s: the sweep did not complete within 90s: its unit was lost", c.step)
			}
			w.Drain()
			if err := <-errc; err != nil {
				t.Errorf("healthy worker: %v", err)
			}
			if got.err != nil {
				t.Fatal(got.err)
			}
			sameFiles(t, "killed after "+string(c.step), single, tableFiles(t, out))
			s := w.Stats()
			if got.last.Done != 12 || got.last.Failed != 0 || got.last.Poison != 0 || got.res.Manifest.Errors != 0 ||
				got.res.Manifest.Rows["pairs"] != int64(2*spec.Seeds.Len()) {
				t.Errorf("coordinator: %+v, manifest errors %d, rows %v: want 12 units done once, no failure",
					got.last, got.res.Manifest.Errors, got.res.Manifest.Rows)
			}
			if s.Units != c.units || s.Again != c.again || (s.Vanished > 0) != c.vanished || s.Failed != 0 || s.Poison != 0 {
				t.Errorf("healthy worker: %+v; want %d units run, %d found done, vanished attempts: %v", s, c.units, c.again, c.vanished)
			}
		})
	}
}
