package scaleout

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A worker process (forklab worker) runs each member of the consumer
// group in a child process of its own and supervises them. The split is
// what tells a unit that crashes its process from a worker that vanished:
//
//   - a member process that dies in the middle of a unit (an os.Exit in a
//     world, a segfault, the OOM killer) while its supervisor lives on is
//     the unit's doing: the supervisor marks the attempt failed with how
//     the process ended and its last line on stderr (MarkCrashed), and
//     starts the member again. The unit goes on to its retry limit, then
//     to error rows, as a unit whose world panics does;
//   - a worker killed as a whole — the supervisor with its members, or a
//     machine lost or preempted — leaves its attempts running without a
//     heartbeat: the next worker runs the unit again, and that attempt
//     does not count (attempt.vanished).
//
// A member process watches its standard input, a pipe from the
// supervisor: at its end (the supervisor died) it exits at once, as if
// killed with it. It reports on file descriptor 3, one JSON object a
// line: {"ready":true} once connected, {"attempt":PATH,"running":BOOL}
// as attempts start and end, {"done":true} per unit finished, and at its
// end {"stats":{…}} and, if it stopped on an error, {"error":"…"}.

// ChildEnv names the environment variable that makes forklab worker run
// one member for its supervisor: its value is "ID K", the worker's name
// and the member's number.
const ChildEnv = "FORKLAB_WORKER_MEMBER"

// childMsg is one line a member process sends its supervisor.
type childMsg struct {
	Ready   bool         `json:"ready,omitempty"`
	Attempt string       `json:"attempt,omitempty"`
	Running bool         `json:"running,omitempty"`
	Done    bool         `json:"done,omitempty"`
	Stats   *WorkerStats `json:"stats,omitempty"`
	Error   string       `json:"error,omitempty"`
}

// ChildLink is a member process's line to its supervisor (file descriptor
// 3). Its methods are safe for concurrent use.
type ChildLink struct {
	mu sync.Mutex
	w  io.Writer
}

// NewChildLink writes to w (os.NewFile(3, …) in a member process).
func NewChildLink(w io.Writer) *ChildLink { return &ChildLink{w: w} }

func (l *ChildLink) send(m childMsg) {
	b, _ := json.Marshal(m)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w.Write(append(b, '\n'))
}

// Configure wires cfg's OnAttempt and OnDone to the link.
func (l *ChildLink) Configure(cfg *WorkerConfig) {
	cfg.OnAttempt = func(path string, running bool) { l.send(childMsg{Attempt: path, Running: running}) }
	cfg.OnDone = func() { l.send(childMsg{Done: true}) }
}

// Ready says the member is connected.
func (l *ChildLink) Ready() { l.send(childMsg{Ready: true}) }

// End sends the member's stats and the error that stopped it, if any.
func (l *ChildLink) End(s WorkerStats, err error) {
	l.send(childMsg{Stats: &s})
	if err != nil {
		l.send(childMsg{Error: err.Error()})
	}
}

// ExitWithParent makes the process exit (status 1) as soon as r, the
// read end of a pipe its supervisor holds open, ends: the supervisor
// died, and its members die with it, as a machine's processes do.
func ExitWithParent(r io.Reader) {
	go func() {
		io.Copy(io.Discard, r)
		os.Exit(1)
	}()
}

// SuperviseConfig configures a supervisor of member processes.
type SuperviseConfig struct {
	// ID is the worker's name; Members how many member processes it runs.
	ID      string
	Members int
	// Command returns the command line that runs member k (forklab
	// worker again, with ChildEnv set); Supervise sets its standard
	// input, its standard error and its file descriptor 3.
	Command func(k int) *exec.Cmd
	// MaxUnits, if positive, drains the members once they finished that
	// many units between them.
	MaxUnits int
	// Stderr gets the members' standard error, line by line.
	Stderr io.Writer
	// Logf gets a line per member process that crashed or was started
	// again.
	Logf func(format string, args ...any)
}

// SupervisedStats is what a supervised worker did.
type SupervisedStats struct {
	WorkerStats
	// Crashes counts the member processes that died in the middle of a
	// unit (each such attempt was marked failed) and were started again.
	Crashes int
}

// Supervise runs cfg.Members member processes until they end: all of them
// drained (Drain closed: each gets SIGTERM and finishes its unit), or one
// stopped on an error (the others are drained, and the error returned).
// Cancelling ctx sends each a second SIGTERM: they stop at once, their
// units left to other workers. A member process that dies mid-unit is
// started again after its attempt is marked failed (MarkCrashed); one
// that dies between units after it was ready is started again too; one
// that dies before it was ready stops the worker.
func Supervise(ctx context.Context, cfg SuperviseConfig, drain <-chan struct{}) (SupervisedStats, error) {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	s := &supervisor{cfg: cfg, exits: make(chan childExit, cfg.Members), children: map[int]*child{}, unitDone: make(chan struct{}, 1)}
	for k := range cfg.Members {
		if err := s.start(k); err != nil {
			s.signalAll()
			s.wait()
			return s.stats, err
		}
	}
	draining, stopping := false, false
	var firstErr error
	for len(s.children) > 0 {
		select {
		case <-drainOr(drain, draining):
			draining = true
			s.signalAll()
		case <-doneOr(ctx, stopping):
			stopping = true
			s.signalAll()
		case <-s.unitDone:
		case e := <-s.exits:
			delete(s.children, e.k)
			c := e.c
			s.add(c.stats)
			if c.err != "" {
				if firstErr == nil {
					firstErr = errors.New(c.err)
				}
				if !draining {
					draining = true
					s.signalAll()
				}
				continue
			}
			if e.state.Success() || draining || stopping {
				continue
			}
			how := exitText(e.state)
			if len(c.open) > 0 {
				s.stats.Crashes++
				for path := range c.open {
					reason := fmt.Sprintf("the worker process running it crashed (%s)", how)
					if c.last != "" {
						reason += ": " + c.last
					}
					if err := MarkCrashed(path, reason); err != nil {
						cfg.Logf("mark the attempt %s failed: %v", path, err)
					}
				}
				cfg.Logf("member %s-%d crashed in the middle of a unit (%s): its attempt is marked failed; starting it again", cfg.ID, e.k, how)
			} else if !c.ready {
				if firstErr == nil {
					firstErr = fmt.Errorf("member %s-%d ended before it joined the group (%s)%s", cfg.ID, e.k, how, lastWords(c.last))
				}
				draining = true
				s.signalAll()
				continue
			} else {
				cfg.Logf("member %s-%d ended between units (%s): starting it again", cfg.ID, e.k, how)
			}
			time.Sleep(500 * time.Millisecond)
			if err := s.start(e.k); err != nil && firstErr == nil {
				firstErr = err
				draining = true
				s.signalAll()
			}
		}
		if cfg.MaxUnits > 0 && !draining && s.done() >= cfg.MaxUnits {
			draining = true
			s.signalAll()
		}
	}
	return s.stats, firstErr
}

func drainOr(drain <-chan struct{}, already bool) <-chan struct{} {
	if already {
		return nil
	}
	return drain
}

func doneOr(ctx context.Context, already bool) <-chan struct{} {
	if already {
		return nil
	}
	return ctx.Done()
}

func lastWords(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// exitText says how a process ended: "exit status 3", "killed by signal
// segmentation fault".
func exitText(st *os.ProcessState) string {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "killed by signal " + ws.Signal().String()
	}
	return fmt.Sprintf("exit status %d", st.ExitCode())
}

type supervisor struct {
	cfg      SuperviseConfig
	exits    chan childExit
	mu       sync.Mutex
	children map[int]*child
	stats    SupervisedStats
	units    int
	unitDone chan struct{} // a unit was finished: look at MaxUnits
}

// child is a member process and what it said.
type child struct {
	cmd   *exec.Cmd
	life  *os.File // the write end of its standard input: held open
	mu    sync.Mutex
	ready bool
	open  map[string]bool // attempts running
	stats WorkerStats
	err   string
	last  string // its last line on standard error
}

type childExit struct {
	k     int
	c     *child
	state *os.ProcessState
}

func (s *supervisor) add(x WorkerStats) {
	st := &s.stats.WorkerStats
	st.Units += x.Units
	st.Again += x.Again
	st.Poison += x.Poison
	st.Failed += x.Failed
	st.Deferred += x.Deferred
	st.FetchErrors += x.FetchErrors
	st.Vanished += x.Vanished
}

func (s *supervisor) done() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.units
}

// start starts member k.
func (s *supervisor) start(k int) error {
	cmd := s.cfg.Command(k)
	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		return err
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd.Stdin, cmd.Stderr = lifeR, errW
	cmd.ExtraFiles = []*os.File{statusW}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start member %s-%d: %w", s.cfg.ID, k, err)
	}
	lifeR.Close()
	statusW.Close()
	errW.Close()
	c := &child{cmd: cmd, life: lifeW, open: map[string]bool{}}
	s.children[k] = c
	var readers sync.WaitGroup
	readers.Go(func() {
		sc := bufio.NewScanner(statusR)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var m childMsg
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				continue
			}
			c.mu.Lock()
			switch {
			case m.Ready:
				c.ready = true
			case m.Attempt != "" && m.Running:
				c.open[m.Attempt] = true
			case m.Attempt != "":
				delete(c.open, m.Attempt)
			case m.Stats != nil:
				c.stats = *m.Stats
			case m.Error != "":
				c.err = m.Error
			}
			c.mu.Unlock()
			if m.Done {
				s.mu.Lock()
				s.units++
				s.mu.Unlock()
				select {
				case s.unitDone <- struct{}{}:
				default:
				}
			}
		}
		statusR.Close()
	})
	readers.Go(func() {
		sc := bufio.NewScanner(errR)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(s.cfg.Stderr, line)
			if t := strings.TrimSpace(line); t != "" {
				c.mu.Lock()
				c.last = t
				c.mu.Unlock()
			}
		}
		errR.Close()
	})
	go func() {
		cmd.Wait()
		readers.Wait()
		lifeW.Close()
		s.exits <- childExit{k: k, c: c, state: cmd.ProcessState}
	}()
	return nil
}

// signalAll sends SIGTERM to every member process: the first makes it
// drain, the second stop at once.
func (s *supervisor) signalAll() {
	for _, c := range s.children {
		c.cmd.Process.Signal(syscall.SIGTERM)
	}
}

// wait waits for every member process to end.
func (s *supervisor) wait() {
	for len(s.children) > 0 {
		e := <-s.exits
		delete(s.children, e.k)
		s.add(e.c.stats)
	}
}
