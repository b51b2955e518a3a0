package scaleout_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forklab/forklab/internal/duck/ducktest"
	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/scaleout"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/world"
)

// inProcess is the counter world as a worker's "external agent".
type inProcess struct{ lab.Definition }

func (inProcess) SetJournal(string) {}
func (inProcess) SetLogDir(string)  {}
func (inProcess) Close() error      { return nil }

// agentWorker runs a worker whose OpenAgent gives the counter, or fails
// with fail, and returns the channel its Run's error arrives on.
func agentWorker(t *testing.T, q scaleout.Queue, id string, fail error) (*scaleout.Worker, <-chan error) {
	t.Helper()
	return agentWorkerOpen(t, q, id, func(context.Context, sweep.AgentSpec) (scaleout.Agent, error) {
		if fail != nil {
			return nil, fail
		}
		def, err := lab.Lookup("counter")
		return inProcess{def}, err
	})
}

// agentWorkerOpen runs a worker whose agents open opens.
func agentWorkerOpen(t *testing.T, q scaleout.Queue, id string, open func(context.Context, sweep.AgentSpec) (scaleout.Agent, error)) (*scaleout.Worker, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := scaleout.NewWorker(ctx, scaleout.WorkerConfig{Queue: q, ID: id, Parallel: 1, SessionTimeout: 6 * time.Second,
		Version: "test", OpenAgent: open, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	errc, ended := make(chan error, 1), make(chan struct{})
	go func() { errc <- w.Run(ctx); close(ended) }()
	t.Cleanup(func() { w.Drain(); <-ended })
	return w, errc
}

// agentSweep is smallUnits as an external agent's sweep.
func agentSweep(t *testing.T, spec sweep.Spec) sweep.Resolved {
	t.Helper()
	r, err := spec.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	r.Spec.Agent = &sweep.AgentSpec{Command: "python3 agent.py"}
	return r
}

var errNoPython = errors.New("exec: python3: not found")

// A worker that cannot start the sweep's agent (the QA report: a relative
// path from another directory) records and reports a failed attempt at
// the unit it took, commits its record and stops; the unit goes to a
// worker that can, the coordinator shows the failure and counts the
// worker, and the sweep is the single-process one.
func TestAgentStartFailureIsAnAttempt(t *testing.T) {
	brokers := cluster(t, 1)
	spec := smallUnits()
	r := agentSweep(t, spec)
	q := scaleout.Queue{Brokers: brokers, Name: "agentstart", Partitions: 2}
	out := filepath.Join(t.TempDir(), "out")
	var logs []string
	type result struct {
		res  sweep.Result
		last scaleout.Status
		err  error
	}
	done := make(chan result, 1)
	statuses := make(chan scaleout.Status, 1024)
	go func() {
		var last scaleout.Status
		res, err := scaleout.Coordinate(context.Background(), r, scaleout.CoordinatorConfig{Queue: q, Out: out, Version: "test",
			Progress: func(s scaleout.Status) {
				last = s
				select {
				case statuses <- s:
				default:
				}
			},
			Logf: func(f string, a ...any) { logs = append(logs, sprintf(f, a...)) }})
		done <- result{res, last, err}
	}()
	_, bad := agentWorker(t, q, "bad", errNoPython)
	workerStops(t, bad, "the worker that cannot start the agent", "cannot start its agent: exec: python3: not found; unit c0-s0000")
	// The coordinator heard of the failure, and of the worker.
	deadline := time.After(30 * time.Second)
	for seen := false; !seen; {
		select {
		case s := <-statuses:
			seen = s.Failed == 1 && s.Workers == 1 && strings.Contains(s.LastFailure, "(worker bad-0): worker bad could not start the agent: exec: python3: not found")
		case <-deadline:
			t.Fatal("the coordinator's status never showed the failed attempt and its worker")
		}
	}
	agentWorker(t, q, "good", nil)
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	if res.last.Done != 12 || res.last.Poison != 0 || res.last.Failed != 1 {
		t.Fatalf("status %+v", res.last)
	}
	sameFiles(t, "after an agent that did not start", tableFiles(t, singleProcess(t, spec)), tableFiles(t, out))
	if !strings.Contains(strings.Join(logs, "\n"), "attempt 1 of 3 failed on worker bad-0: worker bad could not start the agent: exec: python3: not found") {
		t.Errorf("the coordinator's log does not show the failure: %q", logs)
	}
}

// With only workers that cannot start the agent, each failed attempt is
// counted, and at --max-attempts the unit is written as error rows naming
// them (no agent needed): the sweep finishes instead of waiting forever.
func TestAgentThatNeverStartsIsPoison(t *testing.T) {
	brokers := cluster(t, 1)
	spec := smallUnits()
	spec.Seeds = sweep.Range{Start: 0, End: 1000} // one unit
	r := agentSweep(t, spec)
	q := scaleout.Queue{Brokers: brokers, Name: "agentpoison", Partitions: 1}
	out := filepath.Join(t.TempDir(), "out")
	done := make(chan error, 1)
	var last scaleout.Status
	go func() {
		_, err := scaleout.Coordinate(context.Background(), r, scaleout.CoordinatorConfig{Queue: q, Out: out, Version: "test", MaxAttempts: 2,
			Progress: func(s scaleout.Status) { last = s }})
		done <- err
	}()
	for _, id := range []string{"bad1", "bad2"} {
		_, errc := agentWorker(t, q, id, errNoPython)
		if err := <-errc; err == nil || !strings.Contains(err.Error(), "cannot start its agent") {
			t.Fatalf("worker %s: %v", id, err)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the sweep did not finish after the unit's last attempt")
	}
	if last.Poison != 1 || last.Failed != 2 || last.Done != 1 {
		t.Fatalf("status %+v, want the one unit as error rows after 2 failed attempts", last)
	}
	got := ducktest.Query(t, out, `SELECT status, count(*), min(error) FROM {pairs} GROUP BY status`)
	want := "unit c0-s000000 failed 2 attempts, the retry limit, and was not run again: attempt 1 (worker bad1-0): worker bad1 could not start the agent: exec: python3: not found; attempt 2 (worker bad2-0): worker bad2 could not start the agent: exec: python3: not found"
	if len(got) != 1 || got[0][0] != "error" || got[0][1] != "2000" || got[0][2] != want {
		t.Fatalf("pairs by status: %q", got)
	}
}

func sprintf(f string, a ...any) string { return fmt.Sprintf(f, a...) }

// workerStops waits up to a minute for the worker (what) whose Run's error
// arrives on errc to stop with an error holding want.
func workerStops(t *testing.T, errc <-chan error, what, want string) {
	t.Helper()
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s stopped with %v, want %q", what, err, want)
		}
	case <-time.After(time.Minute):
		t.Fatalf("%s did not stop", what)
	}
}

// failingAgent is the counter as an agent that failed fast
// (agentproc.FailFast): its runners fail with err, and Failing says so.
type failingAgent struct {
	inProcess
	err error
}

func (a failingAgent) Failing() error { return a.err }

func (a failingAgent) Open(p world.Params, m fork.Model) (lab.Instance, error) {
	inst, err := a.inProcess.Open(p, m)
	return failingInstance{inst, a.err}, err
}

type failingInstance struct {
	lab.Instance
	err error
}

func (i failingInstance) Runner(lab.Plan) (lab.Runner, error) { return failingRunner{i.err}, nil }

type failingRunner struct{ err error }

func (r failingRunner) Run(context.Context, uint64, uint64, func(*lab.SeedResult) error) error {
	return r.err
}

// A worker whose agent fails fast records and reports its attempt at the
// unit as failed, puts the unit back for other workers and stops, saying
// why; a sound worker then finishes the sweep, the single-process one.
func TestFailingAgentStopsItsWorker(t *testing.T) {
	brokers := cluster(t, 1)
	spec := smallUnits()
	r := agentSweep(t, spec)
	q := scaleout.Queue{Brokers: brokers, Name: "agentfailing", Partitions: 2}
	out := filepath.Join(t.TempDir(), "out")
	done := make(chan error, 1)
	go func() {
		_, err := scaleout.Coordinate(context.Background(), r, scaleout.CoordinatorConfig{Queue: q, Out: out, Version: "test"})
		done <- err
	}()
	failing := errors.New("the agent is failing: its first 20 attempts failed, none succeeded; the last failure: agent process 1 (pid 7) wrote a malformed start reply")
	_, bad := agentWorkerOpen(t, q, "bad", func(context.Context, sweep.AgentSpec) (scaleout.Agent, error) {
		def, err := lab.Lookup("counter")
		return failingAgent{inProcess{def}, failing}, err
	})
	workerStops(t, bad, "the worker whose agent fails", "this worker's agent is failing: the agent is failing: its first 20 attempts failed")
	agentWorker(t, q, "good", nil)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the sound worker did not finish the sweep")
	}
	sameFiles(t, "after a worker whose agent failed", tableFiles(t, singleProcess(t, spec)), tableFiles(t, out))
}
