package scaleout_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forklab/forklab/internal/kafkadial"
	"github.com/forklab/forklab/pipeline/lab/scaleout"
	"github.com/forklab/forklab/stream/broker/brokertest"
	"github.com/segmentio/kafka-go"
)

// runWorker starts a worker of one member on q and returns it with a
// channel that gets Run's error.
func runWorker(t *testing.T, ctx context.Context, q scaleout.Queue, id string, setup func(*scaleout.Worker)) (*scaleout.Worker, <-chan error) {
	t.Helper()
	w, err := scaleout.NewWorker(ctx, scaleout.WorkerConfig{Queue: q, ID: id, Parallel: 1, SessionTimeout: 6 * time.Second,
		Version: "test", Logf: func(f string, a ...any) { t.Logf(f, a...) }})
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(w)
	}
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	return w, errc
}

// coordinate runs the coordinator of spec's sweep into a new directory,
// giving up after limit, and returns the directory and its log lines.
func coordinate(t *testing.T, ctx context.Context, q scaleout.Queue, cfg scaleout.CoordinatorConfig) (string, []string, error) {
	t.Helper()
	r, err := smallUnits().Resolve()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lines []string
	cfg.Queue, cfg.Version = q, "test"
	if cfg.Out == "" {
		cfg.Out = filepath.Join(t.TempDir(), "out")
	}
	cfg.Logf = func(f string, a ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(f, a...))
		mu.Unlock()
		t.Logf("coordinator: "+f, a...)
	}
	_, err = scaleout.Coordinate(ctx, r, cfg)
	mu.Lock()
	defer mu.Unlock()
	return cfg.Out, lines, err
}

// faults fetches through a reader after first failing n times with each
// of errs in turn: the errors a member meets in a consumer group under
// load (issue 25: workers exited on them).
type faults struct {
	scaleout.Fetcher
	mu   sync.Mutex
	errs []error
	sent *atomic.Int64
}

func (f *faults) FetchMessage(ctx context.Context) (kafka.Message, error) {
	f.mu.Lock()
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		f.mu.Unlock()
		f.sent.Add(1)
		return kafka.Message{}, err
	}
	f.mu.Unlock()
	return f.Fetcher.FetchMessage(ctx)
}

// A member whose fetches fail with "[27] Rebalance In Progress", an i/o
// timeout, an unexpected EOF or a closed reader, as under a load of 13 with
// workers SIGKILLed every second, retries (a new reader after io.EOF) and
// goes on taking units: the sweep completes, and the worker counts exactly
// the fetches that failed. Before, the member exited with "fetch: [27]
// Rebalance In Progress: …" and its worker with it.
func TestWorkerRetriesFetchErrors(t *testing.T) {
	b := brokertest.StartCut(t, t.TempDir())
	q := scaleout.Queue{Brokers: b.Brokers(), Name: "flaky", Partitions: 4}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	var sent atomic.Int64
	readers := 0
	w, errc := runWorker(t, ctx, q, "flaky", func(w *scaleout.Worker) {
		scaleout.WrapReaders(w, func(r scaleout.Fetcher) scaleout.Fetcher {
			readers++
			if readers > 1 {
				return &faults{Fetcher: r, sent: &sent} // after io.EOF: a sound reader
			}
			return &faults{Fetcher: r, sent: &sent, errs: []error{
				kafka.RebalanceInProgress, kafka.RebalanceInProgress, timeout, io.ErrUnexpectedEOF,
				kafka.RebalanceInProgress, timeout, io.EOF}}
		})
	})
	out, _, err := coordinate(t, ctx, q, scaleout.CoordinatorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	w.Drain()
	if err := <-errc; err != nil {
		t.Fatalf("worker: %v", err)
	}
	sameFiles(t, "after fetch errors", tableFiles(t, singleProcess(t, smallUnits())), tableFiles(t, out))
	if s := w.Stats(); s.FetchErrors != 7 || sent.Load() != 7 || s.Units != 12 || s.Failed != 0 {
		t.Fatalf("stats %+v, %d errors injected: want 7 fetch errors, 12 units, no failed attempt", s, sent.Load())
	}
	if readers != 2 {
		t.Errorf("%d readers made, want 2 (a new one after io.EOF)", readers)
	}
}

// The network cut for longer than the session timeout in the middle of a
// sweep, then restored: the workers see i/o timeouts, the group falls
// apart and forms again, the coordinator's reads of the results topic
// fail; everyone retries, and the sweep completes with the single
// process's files and no failed attempt. Then the broker is stopped and
// started again (its data directory kept) mid-sweep: the same. Before,
// the coordinator stopped at its first failed read ("the results topic
// readers stopped") and workers exited on "fetch: … i/o timeout".
func TestSweepSurvivesNetworkCutAndBrokerRestart(t *testing.T) {
	b := brokertest.StartCut(t, t.TempDir())
	q := scaleout.Queue{Brokers: b.Brokers(), Name: "cut", Partitions: 4}
	single := tableFiles(t, singleProcess(t, smallUnits()))
	for _, fault := range []string{"cut", "restart"} {
		t.Run(fault, func(t *testing.T) {
			q := q
			q.Name += fault
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			// Slow units (a second each) so that the fault lands
			// mid-sweep: it starts when the first attempt does.
			started := make(chan struct{})
			var once sync.Once
			var ws []*scaleout.Worker
			var errcs []<-chan error
			for i := range 2 {
				w, errc := runWorker(t, ctx, q, fmt.Sprintf("%s%d", fault, i), func(w *scaleout.Worker) {
					scaleout.SetStepHook(w, func(s scaleout.Step) {
						if s == scaleout.StepAttempt {
							once.Do(func() { close(started) })
							time.Sleep(time.Second)
						}
					})
				})
				ws, errcs = append(ws, w), append(errcs, errc)
			}
			var mu sync.Mutex
			var last scaleout.Status
			doneAtFault := make(chan uint64, 1)
			go func() {
				<-started
				time.Sleep(500 * time.Millisecond)
				mu.Lock()
				doneAtFault <- last.Done
				mu.Unlock()
				if fault == "cut" {
					b.Proxy.Cut()
					time.Sleep(8 * time.Second)
					b.Proxy.Restore()
				} else {
					b.Stop()
					time.Sleep(3 * time.Second)
					b.Start()
				}
			}()
			out, _, err := coordinate(t, ctx, q, scaleout.CoordinatorConfig{Progress: func(s scaleout.Status) { mu.Lock(); last = s; mu.Unlock() }})
			if err != nil {
				t.Fatal(err)
			}
			if d := <-doneAtFault; d >= 12 {
				t.Fatalf("the %s came after the sweep (%d units done): make the units slower", fault, d)
			}
			sameFiles(t, "after a "+fault, single, tableFiles(t, out))
			var fetchErrs int64
			for i, w := range ws {
				w.Drain()
				if err := <-errcs[i]; err != nil {
					t.Errorf("worker: %v", err)
				}
				s := w.Stats()
				fetchErrs += s.FetchErrors
				if s.Failed != 0 {
					t.Errorf("worker %d: %d failed attempts, want none: nothing failed but the network", i, s.Failed)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if last.Done != 12 || last.Failed != 0 || last.Poison != 0 {
				t.Errorf("last status %+v: want 12 units done, no failure", last)
			}
			// kafka-go's readers retry some errors themselves: these
			// counts vary from run to run.
			t.Logf("%s: %d fetch errors retried by the workers, %d requests by the coordinator", fault, fetchErrs, last.Retries)
		})
	}
}

// A cluster out of reach for longer than RetryFor ends a worker and a
// coordinator with an error that says so, soon after the limit, not
// before; an outage shorter than the limit does not.
func TestGiveUpAfterRetryFor(t *testing.T) {
	b := brokertest.StartCut(t, t.TempDir())
	q := scaleout.Queue{Brokers: b.Brokers(), Name: "gone", Partitions: 4, RetryFor: 3 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	started := make(chan struct{})
	var once sync.Once
	_, errc := runWorker(t, ctx, q, "left", func(w *scaleout.Worker) {
		scaleout.SetStepHook(w, func(s scaleout.Step) {
			if s == scaleout.StepAttempt {
				once.Do(func() { close(started) })
				time.Sleep(5 * time.Second) // the sweep must not end before the cut
			}
		})
	})
	cerr := make(chan error, 1)
	go func() {
		_, _, err := coordinate(t, ctx, q, scaleout.CoordinatorConfig{})
		cerr <- err
	}()
	<-started
	b.Proxy.Cut()
	cut := time.Now()
	for what, c := range map[string]<-chan error{"worker": errc, "coordinator": cerr} {
		select {
		case err := <-c:
			took := time.Since(cut)
			if !errors.Is(err, kafkadial.ErrGone) || !strings.Contains(err.Error(), "Kafka at "+b.Proxy.Addr()+" unreachable for ") ||
				!strings.Contains(err.Error(), "(--retry-for sets how long to wait)") {
				t.Errorf("%s: %v", what, err)
			}
			if took < 3*time.Second {
				t.Errorf("%s gave up %s after the cut, before --retry-for 3s", what, took)
			}
		case <-time.After(45 * time.Second):
			t.Fatalf("%s did not give up within 45s of the cut (--retry-for 3s)", what)
		}
	}
}

// A coordinator whose group has no member says so once NoWorkers has
// passed, naming the group, what is left and the command to start, and
// says again when a worker is back; the group's own view counts the
// workers. Before, it printed "units 0/12 · 0 workers · 0 running" for
// ever (or said "no worker has reported yet" once, and never again after
// the last worker died).
func TestCoordinatorSaysNoWorkers(t *testing.T) {
	b := brokertest.StartCut(t, t.TempDir())
	q := scaleout.Queue{Brokers: b.Brokers(), Name: "nw", Partitions: 4}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hint := make(chan string, 1)
	var mu sync.Mutex
	var lines []string
	var workersSeen int
	r, err := smallUnits().Resolve()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	go func() {
		select {
		case h := <-hint:
			t.Logf("hint: %s", h)
			w, errc := runWorker(t, ctx, q, "late", nil)
			go func() { <-ctx.Done(); w.Drain(); <-errc }()
		case <-ctx.Done():
		}
	}()
	_, err = scaleout.Coordinate(ctx, r, scaleout.CoordinatorConfig{Queue: q, Out: out, Version: "test", NoWorkers: time.Second,
		Progress: func(s scaleout.Status) {
			mu.Lock()
			workersSeen = max(workersSeen, s.Workers)
			mu.Unlock()
		},
		Logf: func(f string, a ...any) {
			line := fmt.Sprintf(f, a...)
			mu.Lock()
			lines = append(lines, line)
			mu.Unlock()
			if strings.HasPrefix(line, "no worker") {
				select {
				case hint <- line:
				default:
				}
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	all := strings.Join(lines, "\n")
	want := "no worker has been in group nw.workers for "
	tail := ", and 12 of 12 units are left: start some, on machines that mount " + out + ": forklab worker --brokers " + b.Proxy.Addr() + " --queue nw"
	if !strings.Contains(all, want) || !strings.Contains(all, tail) || !strings.Contains(all, "1 worker in group nw.workers again") {
		t.Fatalf("coordinator lines:\n%s\nwant %q…%q, then the worker back", all, want, tail)
	}
	if workersSeen != 1 {
		t.Errorf("at most %d workers in the status, want 1", workersSeen)
	}
}
