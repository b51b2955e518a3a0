// Package chaos runs many agent sessions as separate worker processes
// against a session-log service it owns, and breaks things on purpose: it
// kills workers with SIGKILL and restarts them, freezes some with SIGSTOP,
// starts a successor and lets the frozen one continue (a real zombie), and
// kills and restarts the log service itself. At the end it reads every
// session back and checks that no reader saw a duplicate or a gap, that
// offsets only increased, that every acknowledged event is there, and that
// every session's events and outcome are those of an uninterrupted run.
//
// The sessions may play any registered world (Config.World). Faults are
// planned before anything starts, by events rather than by the clock: each
// session's uninterrupted run is known in advance (session.Uninterrupted),
// so the plan puts every asked kill and zombie after a chosen acknowledged
// event of a chosen session, with at least one event still to come, and
// the log service restarts after chosen numbers of acknowledged events.
// A worker prints each acknowledged event and then waits at a gate for the
// harness's word (agent run -v --gate); the harness reads the line and
// either signals the worker or lets it go on. So every fault asked for
// lands exactly where it was planned, however slow or busy the machine, and
// a plan that the sessions cannot host (more faults than events to put them
// after) is refused before anything runs.
package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/forklab/forklab/internal/caplog"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/sessions/session"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/stream/client"
)

// Config says how hard to shake.
type Config struct {
	// Bin is the forklab binary run as log service and as workers.
	Bin string
	// Sessions to run, worker Kills (SIGKILL) to inflict, Zombies to make
	// (SIGSTOP, successor, SIGCONT), and Restarts of the log service.
	Sessions, Kills, Zombies, Restarts int
	// Seed drives every random choice of the run: the plan of faults and
	// the sessions' task seeds (Seed*1000 + i for session i).
	Seed uint64
	// Parallel bounds the sessions running at once (default 10).
	Parallel int
	// Delay is each worker's pause before every append (default 20ms), so
	// that appends, restarts of the log and readers overlap as in a real
	// deployment. Faults do not depend on it: workers wait at a gate after
	// each event.
	Delay time.Duration
	// DataDir is the log service's data directory (default: a temporary
	// one, removed at the end).
	DataDir string
	// World names the sessions' world (default counter); Params are its
	// parameters (those not set take their defaults) and Model the fake
	// model. Every worker process gets all of them (WorkerArgs).
	World  string
	Params world.Params
	Model  fork.Model
	// SinkKills > 0 runs forklab log sink --follow beside the sessions
	// and kills it with SIGKILL that many times, starting it again each
	// time. SinkOut is its output directory (default: DataDir/sink-out).
	SinkKills int
	SinkOut   string
	// Logf reports progress; nil is silent.
	Logf func(format string, args ...any)
}

// Report is what a chaos run did and found.
type Report struct {
	Config Config
	// Start is the session_start of session 0 (world, version, resolved
	// parameters and model; the seed varies by session).
	Start     session.Event
	Sessions  int
	Completed int
	Events    int // domain events of all sessions
	Capacity  int // the most worker faults the sessions can host
	Processes int // worker processes started (incarnations)
	Kills     int
	Zombies   int
	Fenced403 int // zombie appends refused with 403 (stale epoch)
	Closed409 int // zombie appends refused with 409 (session closed by the successor)
	Unfenced  int // zombies that exited without being refused: must be 0
	Crashed   int // workers that exited on their own with an error: must be 0
	Restarts  int // log service kills and restarts

	Duplicates  int // duplicate domain events seen by readers
	Gaps        int // missing domain events seen by readers
	Unordered   int // reads whose next offset did not increase
	ReaderDiff  int // live readers whose messages differ from a final catch-up read
	Differing   int // sessions whose events or outcome differ from an uninterrupted run
	Lost        int // events acknowledged to a worker and missing from the log
	Elapsed     time.Duration
	ServiceDown time.Duration
	// Problems describes each failed check, one line per session and kind.
	Problems []string

	// The sink beside the run (SinkKills > 0): its SIGKILLs, the events
	// its files hold, sessions whose events there differ from the log's,
	// problems of its directory (overlaps, duplicates, gaps), and whether
	// a one-shot run after the end wrote anything.
	SinkKills     int
	SinkEvents    int
	SinkDiffering int
	SinkProblems  int
	SinkRerun     string
}

// OK reports whether every check passed and every fault asked for landed.
func (r *Report) OK() bool {
	c := r.Config
	sinkOK := c.SinkKills == 0 || (r.SinkKills == c.SinkKills && r.SinkDiffering == 0 && r.SinkProblems == 0 && r.SinkRerun == "nothing")
	return r.Completed == r.Sessions && r.Duplicates == 0 && r.Gaps == 0 && r.Unordered == 0 &&
		r.ReaderDiff == 0 && r.Differing == 0 && r.Lost == 0 && r.Unfenced == 0 && r.Crashed == 0 &&
		r.Kills == c.Kills && r.Zombies == c.Zombies && r.Restarts == c.Restarts && r.Fenced403+r.Closed409 == r.Zombies && sinkOK
}

// Write prints the report as a table.
func (r *Report) Write(w io.Writer) {
	c := r.Config
	params := "{}"
	if r.Start.Params != nil {
		params = string(mustJSON(*r.Start.Params))
	}
	fmt.Fprintf(w, "CHAOS · %d sessions · seed %d · %d parallel · worker delay %s\n", c.Sessions, c.Seed, c.Parallel, c.Delay)
	fmt.Fprintf(w, "world %s %s · params %s · temperature %g · no_tool %g\n", r.Start.World, r.Start.WorldVersion, params, c.Model.Temperature, c.Model.NoTool)
	rows := [][2]string{
		{"sessions completed", fmt.Sprintf("%d / %d", r.Completed, r.Sessions)},
		{"domain events (room for faults)", fmt.Sprintf("%d (%d)", r.Events, r.Capacity)},
		{"worker processes (incarnations)", fmt.Sprint(r.Processes)},
		{"workers killed (SIGKILL)", asked(r.Kills, c.Kills)},
		{"zombies (SIGSTOP, successor, SIGCONT)", asked(r.Zombies, c.Zombies)},
		{"  zombie appends fenced (403)", fmt.Sprint(r.Fenced403)},
		{"  zombie appends refused, session closed (409)", fmt.Sprint(r.Closed409)},
		{"  zombies not refused", fmt.Sprint(r.Unfenced)},
		{"workers that failed on their own", fmt.Sprint(r.Crashed)},
		{"log service restarts (SIGKILL)", fmt.Sprintf("%s (down %s in all)", asked(r.Restarts, c.Restarts), r.ServiceDown.Round(time.Millisecond))},
		{"duplicates seen by readers", fmt.Sprint(r.Duplicates)},
		{"gaps seen by readers", fmt.Sprint(r.Gaps)},
		{"reads with non-increasing offsets", fmt.Sprint(r.Unordered)},
		{"live readers differing from catch-up", fmt.Sprint(r.ReaderDiff)},
		{"acknowledged events lost", fmt.Sprint(r.Lost)},
		{"sessions differing from an uninterrupted run", fmt.Sprint(r.Differing)},
	}
	if c.SinkKills > 0 {
		rows = append(rows,
			[2]string{"sink --follow beside the run: SIGKILLs", asked(r.SinkKills, c.SinkKills)},
			[2]string{"  events in its files", fmt.Sprint(r.SinkEvents)},
			[2]string{"  sessions whose events differ from the log's", fmt.Sprint(r.SinkDiffering)},
			[2]string{"  duplicates, gaps or overlaps in its files", fmt.Sprint(r.SinkProblems)},
			[2]string{"  a one-shot run after the end wrote", r.SinkRerun})
	}
	rows = append(rows, [2]string{"elapsed", r.Elapsed.Round(time.Millisecond).String()})
	for _, row := range rows {
		fmt.Fprintf(w, "%-50s %s\n", row[0], row[1])
	}
	for _, p := range r.Problems {
		fmt.Fprintln(w, "problem:", p)
	}
	if r.OK() {
		fmt.Fprintln(w, "verdict: OK")
	} else {
		fmt.Fprintln(w, "verdict: FAILED")
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(fmt.Sprintf("%v", v))
	}
	return b
}

// fault is one planned worker fault of a session.
type fault struct {
	// after: the fault lands on the live worker once the session's first
	// `after` domain events are acknowledged (1 <= after < the session's
	// events), and once that worker has acknowledged one of its own.
	after  int
	zombie bool
	// wake: a zombie is woken once `wake` events are acknowledged
	// (after < wake); wake equal to the session's events wakes it after
	// the session has finished (its append then meets the closed stream).
	wake int
}

// sessionState tracks one session through the run.
type sessionState struct {
	name     string
	seed     uint64
	start    session.Event
	expected []string       // the domain events of the uninterrupted run
	index    map[string]int // position of each expected event
	faults   []fault        // planned, in order of after
	next     int            // the next fault to land
	progress int            // domain events acknowledged so far (the furthest seen)
	live     *proc          // the incarnation expected to finish it
	frozen   []*proc        // zombies waiting to be woken or to exit
	launch   bool           // a successor is due (the live worker was frozen)
	done     bool
	acked    map[string]bool // domain events acknowledged to some incarnation
}

type proc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser // the worker's gate: a line lets it go on after an event
	acked  int            // domain events this incarnation acknowledged
	killed bool           // we sent SIGKILL
	zombie bool           // we sent SIGSTOP
	wake   int            // zombies: when to wake
	woken  bool
	exited chan struct{}
	code   int
	stderr strings.Builder
}

func (c *Config) defaults() {
	if c.Parallel <= 0 {
		c.Parallel = 10
	}
	if c.Delay <= 0 {
		c.Delay = 20 * time.Millisecond
	}
	if c.World == "" {
		c.World = "counter"
	}
}

// Plan checks a configuration without running anything: it computes every
// session's uninterrupted run and the plan of faults, and returns the
// report's header (the sessions' start, their events and the room they
// leave for faults). It fails, saying why, on a configuration the sessions
// cannot host: an unknown world or bad parameters, more kills and zombies
// than the sessions have events to put them after, more restarts than
// events.
func Plan(cfg Config) (*Report, error) {
	rep, _, err := plan(cfg)
	return rep, err
}

// plan is Plan, with the sessions and their faults.
func plan(cfg Config) (*Report, []*sessionState, error) {
	cfg.defaults()
	if cfg.Sessions < 1 || cfg.Kills < 0 || cfg.Zombies < 0 || cfg.Restarts < 0 {
		return nil, nil, fmt.Errorf("chaos: sessions must be at least 1 and kills, zombies, restarts at least 0")
	}
	if cfg.Seed > (1<<63-1-uint64(cfg.Sessions))/1000 {
		return nil, nil, fmt.Errorf("chaos: seed %d is too large: session i plays task seed SEED*1000+i, which must stay below 2^63", cfg.Seed)
	}
	rep := &Report{Config: cfg, Sessions: cfg.Sessions}
	sessions := make([]*sessionState, cfg.Sessions)
	var slots [][2]int // (session, after)
	for i := range sessions {
		seed := cfg.Seed*1000 + uint64(i)
		start, err := session.NewStart(cfg.World, cfg.Params, cfg.Model, seed)
		if err != nil {
			return nil, nil, fmt.Errorf("chaos: %w", err)
		}
		if i == 0 {
			rep.Start = start
		}
		events, err := session.Uninterrupted(start)
		if err != nil {
			return nil, nil, fmt.Errorf("chaos: session %d: %w", i, err)
		}
		s := &sessionState{name: fmt.Sprintf("chaos-%d/s%03d", cfg.Seed, i), seed: seed, start: start,
			index: map[string]int{}, acked: map[string]bool{}}
		for k, e := range events {
			b := string(e.Encode())
			s.expected = append(s.expected, b)
			s.index[b] = k
		}
		for after := 1; after < len(events); after++ {
			slots = append(slots, [2]int{i, after})
		}
		rep.Events += len(events)
		sessions[i] = s
	}
	rep.Capacity = len(slots)
	if n := cfg.Kills + cfg.Zombies; n > len(slots) {
		return nil, nil, fmt.Errorf("chaos: %d sessions of world %s have %d events in all, room for at most %d worker faults (one after each event but a session's last): %d kills and %d zombies do not fit; ask for fewer or run more --sessions",
			cfg.Sessions, cfg.World, rep.Events, len(slots), cfg.Kills, cfg.Zombies)
	}
	if cfg.Restarts >= rep.Events {
		return nil, nil, fmt.Errorf("chaos: %d log restarts do not fit between the sessions' %d events", cfg.Restarts, rep.Events)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	rng.Shuffle(len(slots), func(i, j int) { slots[i], slots[j] = slots[j], slots[i] })
	for k, sl := range slots[:cfg.Kills+cfg.Zombies] {
		s := sessions[sl[0]]
		f := fault{after: sl[1], zombie: k < cfg.Zombies}
		if f.zombie {
			f.wake = f.after + 1 + rng.IntN(len(s.expected)-f.after)
		}
		s.faults = append(s.faults, f)
	}
	for _, s := range sessions {
		sort.Slice(s.faults, func(i, j int) bool { return s.faults[i].after < s.faults[j].after })
	}
	return rep, sessions, nil
}

// Run runs the chaos experiment and returns its report; an error means the
// harness itself could not run, or the plan was refused (the checks'
// failures are in the report).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	rep, sessions, err := plan(cfg)
	if err != nil {
		return nil, err
	}
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	start := time.Now()
	if cfg.DataDir == "" {
		dir, err := os.MkdirTemp("", "forklab-chaos-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		cfg.DataDir = dir
		rep.Config.DataDir = dir
	}
	kafkaPort := 0
	if cfg.SinkKills > 0 {
		// The sink reads Kafka directly: the broker keeps its port over
		// the service's restarts.
		if kafkaPort, err = freePort(); err != nil {
			return nil, err
		}
		if cfg.SinkOut == "" {
			cfg.SinkOut = filepath.Join(cfg.DataDir, "sink-out")
		}
		rep.Config = cfg
	}
	svc, err := startService(ctx, cfg.Bin, cfg.DataDir, "", kafkaPort)
	if err != nil {
		return nil, err
	}
	defer func() { svc.stop() }()
	c := client.New(svc.url)
	var sk *sinkProc
	if cfg.SinkKills > 0 {
		if sk, err = startSink(cfg, kafkaPort, true); err != nil {
			return nil, err
		}
		defer func() { sk.kill() }()
	}
	sinkEvery := max(1, rep.Events/(cfg.SinkKills+1))

	// Live readers: one long-poll reader per session from the beginning,
	// surviving service restarts by resuming from its offset.
	readCtx, stopReaders := context.WithCancel(ctx)
	defer stopReaders()
	readers := make([]*follower, len(sessions))
	var rwg sync.WaitGroup

	// The log restarts after these numbers of acknowledged events.
	var restartAt []int
	for r := 1; r <= cfg.Restarts; r++ {
		restartAt = append(restartAt, rep.Events*r/(cfg.Restarts+1))
	}
	var mu sync.Mutex // guards sessions, their procs and rep's counters
	progress := func() int {
		n := 0
		for _, s := range sessions {
			n += s.progress
		}
		return n
	}
	// onEvent handles an event p acknowledged (from its -v line), while p
	// waits at its gate: it lands the session's next fault on p, or lets
	// p go on, and wakes zombies that are due.
	onEvent := func(s *sessionState, p *proc, ev string) {
		mu.Lock()
		defer mu.Unlock()
		defer func() {
			if !p.killed && !p.zombie {
				io.WriteString(p.stdin, "\n")
			}
		}()
		s.acked[ev] = true
		k, ok := s.index[ev]
		if !ok {
			return // not an expected event: the final check reports it
		}
		p.acked++
		s.progress = max(s.progress, k+1)
		if p == s.live && !p.killed && !p.zombie && s.next < len(s.faults) && s.faults[s.next].after <= s.progress {
			f := s.faults[s.next]
			s.next++
			if f.zombie {
				if p.cmd.Process.Signal(syscall.SIGSTOP) == nil {
					p.zombie, p.wake = true, f.wake
					s.frozen = append(s.frozen, p)
					s.live, s.launch = nil, true
					rep.Zombies++
				}
			} else if p.cmd.Process.Signal(syscall.SIGKILL) == nil {
				p.killed = true
			}
		}
		wakeDue(s)
	}
	launch := func(s *sessionState) error {
		p, err := startWorker(cfg, svc.url, s, onEvent)
		if err != nil {
			return err
		}
		rep.Processes++
		s.live, s.launch = p, false
		return nil
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(15*time.Minute + time.Duration(cfg.Sessions+cfg.Kills+cfg.Zombies)*time.Second)
	next := 0 // next session to start
	for {
		select {
		case <-ctx.Done():
			mu.Lock()
			killAll(sessions)
			mu.Unlock()
			return rep, ctx.Err()
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			mu.Lock()
			killAll(sessions)
			mu.Unlock()
			return rep, fmt.Errorf("chaos: sessions did not finish in time")
		}
		mu.Lock()
		running := 0
		for _, s := range sessions[:next] {
			if !s.done {
				running++
			}
		}
		for next < len(sessions) && running < cfg.Parallel {
			s := sessions[next]
			if err := launch(s); err != nil {
				mu.Unlock()
				return rep, err
			}
			readers[next] = newFollower(c, s.name)
			rwg.Add(1)
			go func(f *follower) { defer rwg.Done(); f.run(readCtx) }(readers[next])
			next++
			running++
		}
		for _, s := range sessions[:next] {
			if err := step(s, rep, logf, launch); err != nil {
				mu.Unlock()
				return rep, err
			}
		}
		restart := len(restartAt) > rep.Restarts && progress() >= restartAt[rep.Restarts]
		// Done when every session is and no zombie is left, and no restart
		// that is due is still to come.
		allDone := rep.Completed == cfg.Sessions && !restart
		for _, s := range sessions {
			if len(s.frozen) > 0 {
				allDone = false
			}
		}
		mu.Unlock()
		if restart {
			down := time.Now()
			logf("killing the log service (restart %d of %d)", rep.Restarts+1, cfg.Restarts)
			svc.kill()
			if svc, err = startService(ctx, cfg.Bin, cfg.DataDir, svc.addr, kafkaPort); err != nil {
				return rep, err
			}
			mu.Lock()
			rep.Restarts++
			rep.ServiceDown += time.Since(down)
			mu.Unlock()
		}
		if sk != nil && rep.SinkKills < cfg.SinkKills && progress() >= (rep.SinkKills+1)*sinkEvery {
			sk.kill()
			rep.SinkKills++
			if sk, err = startSink(cfg, kafkaPort, true); err != nil {
				return rep, err
			}
		}
		if allDone {
			break
		}
	}
	// Let the live readers reach the closed tails, then check everything.
	waitReaders := make(chan struct{})
	go func() { rwg.Wait(); close(waitReaders) }()
	select {
	case <-waitReaders:
	case <-time.After(30 * time.Second):
		stopReaders()
		<-waitReaders
	}
	for i, s := range sessions {
		check(ctx, c, s, readers[i], rep)
	}
	if sk != nil {
		for rep.SinkKills < cfg.SinkKills { // sessions ended before every kill came due
			sk.kill()
			rep.SinkKills++
			if sk, err = startSink(cfg, kafkaPort, true); err != nil {
				return rep, err
			}
		}
		if err := checkSink(ctx, c, cfg, kafkaPort, sk, sessions, rep); err != nil {
			return rep, err
		}
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// wakeDue wakes the frozen zombies of s whose time has come: once the
// session has acknowledged their wake count of events, or has finished.
func wakeDue(s *sessionState) {
	for _, z := range s.frozen {
		if !z.woken && (s.progress >= z.wake && z.wake < len(s.expected) || s.done) {
			z.cmd.Process.Signal(syscall.SIGCONT)
			io.WriteString(z.stdin, "\n") // through its gate, to its next append
			z.woken = true
		}
	}
}

// step advances one session's bookkeeping: zombies that exited, the live
// worker's exit (finished, killed by plan, or failed), and a successor
// when one is due. It runs with the harness's lock held.
func step(s *sessionState, rep *Report, logf func(string, ...any), launch func(*sessionState) error) error {
	kept := s.frozen[:0]
	for _, z := range s.frozen {
		select {
		case <-z.exited:
			switch {
			case z.code == 3 && strings.Contains(z.stderr.String(), "(409)"):
				rep.Closed409++
			case z.code == 3:
				rep.Fenced403++
			default:
				rep.Unfenced++
				rep.Problems = append(rep.Problems, fmt.Sprintf("%s: a zombie exited %d instead of being refused: %s", s.name, z.code, lastLine(z.stderr.String())))
			}
			continue
		default:
		}
		kept = append(kept, z)
	}
	s.frozen = kept
	if s.done {
		return nil
	}
	if s.live != nil {
		p := s.live
		select {
		case <-p.exited:
		default:
			return nil
		}
		switch {
		case p.code == 0:
			s.done = true
			rep.Completed++
			wakeDue(s)
			return nil
		case p.killed:
			rep.Kills++
		default:
			rep.Crashed++
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: worker exited %d: %s", s.name, p.code, lastLine(p.stderr.String())))
			logf("%s: worker exited %d: %s", s.name, p.code, lastLine(p.stderr.String()))
		}
		s.launch = true
	}
	if s.launch {
		return launch(s)
	}
	return nil
}

func killAll(sessions []*sessionState) {
	for _, s := range sessions {
		if s.live != nil {
			s.live.cmd.Process.Kill() // an error only says it has exited already
		}
		for _, z := range s.frozen {
			z.cmd.Process.Kill()
		}
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// WorkerArgs are the arguments of one `forklab agent run` incarnation of
// the session that starts with start: every world parameter as --param
// (so the worker's session_start is start, byte for byte, whatever the
// world's defaults), the model, the seed, the delay, and -v --gate so it
// reports each acknowledged event and waits for the harness's word
// before its next append.
func WorkerArgs(url, name string, start session.Event, delay time.Duration) []string {
	args := []string{"agent", "run", "--log", url, "--session", name, "--seed", fmt.Sprint(*start.Seed),
		"--world", start.World, "--delay", delay.String(), "--retry-for", "3m", "-v", "--gate",
		"--temperature", fmt.Sprint(start.Model.Temperature), "--no-tool", fmt.Sprint(start.Model.NoTool)}
	if start.Params != nil {
		p := *start.Params
		keys := make([]string, 0, len(p))
		for k := range p {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			args = append(args, "--param", k+"="+paramText(p, k))
		}
	}
	return args
}

// paramText writes a parameter as --param reads it back: lists
// comma-separated, numbers in their shortest exact form.
func paramText(p world.Params, k string) string {
	switch v := p[k].(type) {
	case []int64:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = fmt.Sprint(x)
		}
		return strings.Join(parts, ",")
	case []float64:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = world.Params{"x": x}.Text("x")
		}
		return strings.Join(parts, ",")
	}
	return p.Text(k)
}

// startWorker starts one incarnation of s's session; onEvent is called
// with each event it reports acknowledged.
func startWorker(cfg Config, url string, s *sessionState, onEvent func(*sessionState, *proc, string)) (*proc, error) {
	cmd := exec.Command(cfg.Bin, WorkerArgs(url, s.name, s.start, cfg.Delay)...)
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker: %w", err)
	}
	go func() {
		sc := bufio.NewScanner(errPipe)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.stderr.WriteString(line + "\n")
			// -v lines: "TAIL  EVENT": an acknowledged event.
			if tail, ev, ok := strings.Cut(line, "  "); ok && len(tail) > 10 && !strings.Contains(tail, " ") && strings.HasPrefix(ev, "{") {
				onEvent(s, p, ev)
			}
		}
		err := cmd.Wait()
		p.code = 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.code = ee.ExitCode() // -1 when killed by a signal
		} else if err != nil {
			p.code = -2
		}
		close(p.exited)
	}()
	return p, nil
}

// service is the log service child process.
type service struct {
	cmd    *exec.Cmd
	url    string
	addr   string
	dir    string
	exited chan struct{} // closed once the process has been waited for
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func startService(ctx context.Context, bin, dir, addr string, kafkaPort int) (*service, error) {
	if addr == "" {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		addr = fmt.Sprintf("127.0.0.1:%d", p)
	}
	args := []string{"log", "serve", "--addr", addr, "--data-dir", dir, "--quiet"}
	if kafkaPort > 0 {
		args = append(args, "--kafka-port", fmt.Sprint(kafkaPort))
	}
	cmd := exec.Command(bin, args...)
	logFile, err := caplog.Open(filepath.Join(dir, "service.log"), false)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start log service: %w", err)
	}
	s := &service{cmd: cmd, url: "http://" + addr, addr: addr, dir: dir, exited: make(chan struct{})}
	go func() { cmd.Wait(); logFile.Close(); close(s.exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		res, err := http.Get(s.url + "/v1/stream/__chaos_ready")
		if err == nil {
			res.Body.Close()
			return s, nil
		}
		select {
		case <-ctx.Done():
			s.kill()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	s.kill()
	return nil, fmt.Errorf("log service on %s did not come up in 60s (see %s/service.log)", addr, dir)
}

// kill kills the service with SIGKILL and waits until it is gone.
func (s *service) kill() {
	s.cmd.Process.Kill()
	<-s.exited
}

// stop asks the service to stop (SIGTERM), and kills it after 10s.
func (s *service) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		s.kill()
	}
}

// follower is a live reader of one session stream.
type follower struct {
	c         *client.Client
	stream    string
	messages  []string
	unordered int
	err       error
}

func newFollower(c *client.Client, stream string) *follower {
	return &follower{c: c, stream: stream}
}

// run long-polls from the beginning until the stream is closed, resuming
// from its last offset after any error (a restarting service, a stream not
// created yet).
func (f *follower) run(ctx context.Context) {
	offset := client.Start
	for ctx.Err() == nil {
		r := f.c.NewReader(f.stream, offset, client.LongPoll)
		for {
			ch, err := r.Next(ctx)
			if err == io.EOF {
				// The reader's own end: the stream is closed and read. (A
				// dropped connection is client.ErrConnClosed; retried.)
				return
			}
			if err != nil {
				break
			}
			if offset != client.Start && ch.Next <= offset {
				f.unordered++
			}
			msgs, err := ch.Messages()
			if err != nil {
				f.err = err
				return
			}
			for _, m := range msgs {
				f.messages = append(f.messages, string(m))
			}
			offset = r.Offset()
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// check reads a finished session back and compares it with the
// uninterrupted run, the acknowledged events and the live reader.
func check(ctx context.Context, c *client.Client, s *sessionState, f *follower, rep *Report) {
	data, _, err := c.ReadAll(ctx, s.name, client.Start)
	if err != nil {
		rep.Differing++
		return
	}
	events, err := session.DecodeBatch(data)
	if err != nil {
		rep.Differing++
		return
	}
	var domain []string
	seen := map[string]int{}
	for _, e := range events {
		if e.Type == session.TypeIncarnation {
			continue
		}
		b := string(e.Encode())
		domain = append(domain, b)
		seen[b]++
	}
	want := s.expected
	wantSet := map[string]bool{}
	for _, w := range want {
		wantSet[w] = true
	}
	for _, n := range seen {
		if n > 1 {
			rep.Duplicates += n - 1
		}
	}
	for _, w := range want {
		if seen[w] == 0 {
			rep.Gaps++
		}
	}
	if strings.Join(domain, "\n") != strings.Join(want, "\n") {
		rep.Differing++
		rep.Problems = append(rep.Problems, fmt.Sprintf("%s: events differ from the uninterrupted run; first difference: %s", s.name, firstDiff(domain, want)))
	}
	for ev := range s.acked {
		if seen[ev] == 0 {
			rep.Lost++
		}
	}
	if f != nil {
		rep.Unordered += f.unordered
		var all []string
		for _, e := range events {
			all = append(all, string(e.Encode()))
		}
		var got []string
		for _, m := range f.messages {
			e, err := session.Decode([]byte(m))
			if err != nil {
				got = append(got, m)
				continue
			}
			got = append(got, string(e.Encode()))
		}
		if strings.Join(got, "\n") != strings.Join(all, "\n") {
			rep.ReaderDiff++
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: live reader saw %d messages, catch-up read %d; first difference: %s",
				s.name, len(got), len(all), firstDiff(got, all)))
		}
	}
}

// asked prints a count of faults beside the number asked for, when they
// differ (a run interrupted before its plan was carried out).
func asked(got, want int) string {
	if got == want {
		return fmt.Sprint(got)
	}
	return fmt.Sprintf("%d (of %d asked)", got, want)
}

// firstDiff describes where two message lists first differ.
func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("message %d: %s vs %s", i, a[i], b[i])
		}
	}
	if len(a) > len(b) {
		return fmt.Sprintf("message %d only in the first: %s", len(b), a[len(b)])
	}
	if len(b) > len(a) {
		return fmt.Sprintf("message %d only in the second: %s", len(a), b[len(a)])
	}
	return "none"
}
