// Package chaos runs many agent sessions as separate worker processes
// against a session-log service it owns, and breaks things on purpose: it
// kills workers with SIGKILL at random moments and restarts them, freezes
// some with SIGSTOP, starts a successor and lets the frozen one continue (a
// real zombie), and kills and restarts the log service itself. At the end
// it reads every session back and checks that no reader saw a duplicate or
// a gap, that offsets only increased, that every acknowledged event is
// there, and that every session's events and outcome are those of an
// uninterrupted run.
//
// With SinkKills, a forklab log sink --follow copies the sessions' events
// into Parquet beside the run and is killed with SIGKILL and restarted that
// many times; at the end its files must hold exactly the events the log
// holds, stream by stream, and a one-shot run after it must write nothing.
package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/forklab/forklab/pipeline/counter"
	"github.com/forklab/forklab/pipeline/fork"
	"github.com/forklab/forklab/pipeline/session"
	"github.com/forklab/forklab/stream/client"
)

// Config says how hard to shake.
type Config struct {
	// Bin is the forklab binary run as log service and as workers.
	Bin string
	// Sessions to run, worker Kills (SIGKILL) to inflict, Zombies to make
	// (SIGSTOP, successor, SIGCONT), and Restarts of the log service.
	Sessions, Kills, Zombies, Restarts int
	// Seed drives every random choice of the run (and the sessions' seeds).
	Seed uint64
	// Parallel bounds the sessions running at once (default 10).
	Parallel int
	// Delay is each worker's pause before every append (default 20ms), so
	// that kills land inside sessions.
	Delay time.Duration
	// DataDir is the log service's data directory (default: a temporary
	// one, removed at the end).
	DataDir string
	// Params and Model are the sessions' world and fake model.
	Params counter.Params
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
	Config      Config
	Sessions    int
	Completed   int
	Processes   int // worker processes started (incarnations)
	Kills       int
	Zombies     int
	Fenced403   int // zombie appends refused with 403 (stale epoch)
	Closed409   int // zombie appends refused with 409 (session closed by the successor)
	ZombieWon   int // zombies frozen before their claim: on waking they claimed a newer epoch and fenced their successor, which is safe
	ZombieIdle  int // zombies frozen before reading that woke to a finished session and wrote nothing
	Restarts    int // log service kills and restarts
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

// OK reports whether every check passed.
func (r *Report) OK() bool {
	sinkOK := r.Config.SinkKills == 0 || (r.SinkDiffering == 0 && r.SinkProblems == 0 && r.SinkRerun == "nothing")
	return r.Completed == r.Sessions && r.Duplicates == 0 && r.Gaps == 0 && r.Unordered == 0 &&
		r.ReaderDiff == 0 && r.Differing == 0 && r.Lost == 0 && sinkOK
}

// Write prints the report as a table.
func (r *Report) Write(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "CHAOS · %d sessions · seed %d · %d parallel · worker delay %s · temperature %g · p_stall %g\n",
		c.Sessions, c.Seed, c.Parallel, c.Delay, c.Model.Temperature, c.Params.PStall)
	rows := [][2]string{
		{"sessions completed", fmt.Sprintf("%d / %d", r.Completed, r.Sessions)},
		{"worker processes (incarnations)", fmt.Sprint(r.Processes)},
		{"workers killed (SIGKILL)", asked(r.Kills, c.Kills)},
		{"zombies (SIGSTOP, successor, SIGCONT)", asked(r.Zombies, c.Zombies)},
		{"  zombie appends fenced (403)", fmt.Sprint(r.Fenced403)},
		{"  zombie appends refused, session closed (409)", fmt.Sprint(r.Closed409)},
		{"  zombies frozen before claiming, who took over", fmt.Sprint(r.ZombieWon)},
		{"  zombies that woke to a finished session, wrote nothing", fmt.Sprint(r.ZombieIdle)},
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

// sessionState tracks one session through the run.
type sessionState struct {
	name   string
	seed   uint64
	live   *proc   // the incarnation expected to finish it
	frozen []*proc // zombies waiting to be woken or to exit
	done   bool
	acked  map[string]bool // domain events acknowledged to some incarnation
	mu     sync.Mutex
}

type proc struct {
	cmd      *exec.Cmd
	zombie   bool
	killAt   time.Time // zero: no kill planned
	freezeAt time.Time
	wakeAt   time.Time
	exited   chan struct{}
	code     int
	stderr   strings.Builder
}

func (c *Config) defaults() {
	if c.Parallel <= 0 {
		c.Parallel = 10
	}
	if c.Delay <= 0 {
		c.Delay = 20 * time.Millisecond
	}
	if len(c.Params.Slack) == 0 {
		c.Params = counter.Default()
	}
}

// Run runs the chaos experiment and returns its report; an error means the
// harness itself could not run (the checks' failures are in the report).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	if cfg.Sessions < 1 || cfg.Kills < 0 || cfg.Zombies < 0 || cfg.Restarts < 0 {
		return nil, fmt.Errorf("chaos: sessions must be at least 1 and kills, zombies, restarts at least 0")
	}
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	rep := &Report{Config: cfg, Sessions: cfg.Sessions}
	start := time.Now()
	var err error
	if cfg.DataDir == "" {
		dir, err := os.MkdirTemp("", "forklab-chaos-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		cfg.DataDir = dir
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
	sinkEvery := max(1, (cfg.Sessions+cfg.Kills)/(cfg.SinkKills+1))

	sessions := make([]*sessionState, cfg.Sessions)
	for i := range sessions {
		sessions[i] = &sessionState{name: fmt.Sprintf("chaos-%d/s%03d", cfg.Seed, i), seed: cfg.Seed*1000 + uint64(i), acked: map[string]bool{}}
	}
	// Live readers: one long-poll reader per session from the beginning,
	// surviving service restarts by resuming from its offset.
	readCtx, stopReaders := context.WithCancel(ctx)
	defer stopReaders()
	readers := make([]*follower, len(sessions))
	var rwg sync.WaitGroup

	pendingKills, zombies := 0, cfg.Zombies
	restartEvery := 0
	if cfg.Restarts > 0 {
		restartEvery = max(1, (cfg.Sessions+cfg.Kills)/(cfg.Restarts+1))
	}
	events := 0 // completions and kills, to pace the service restarts
	next := 0   // next session to start
	launch := func(s *sessionState) error {
		p, err := startWorker(cfg, svc.url, s)
		if err != nil {
			return err
		}
		rep.Processes++
		now := time.Now()
		left := cfg.Sessions - rep.Completed
		// Plan the fault inside what is left of the session: about 22
		// events of Delay each, less those already acknowledged.
		s.mu.Lock()
		done := len(s.acked)
		s.mu.Unlock()
		window := max(60*time.Millisecond, time.Duration(22-min(done, 20))*cfg.Delay)
		at := func() time.Time { return now.Add(30*time.Millisecond + time.Duration(rng.Int64N(int64(window)))) }
		if kills := cfg.Kills - rep.Kills - pendingKills; kills > 0 && rng.Float64() < min(0.9, float64(kills)/float64(max(1, left))) {
			p.killAt = at()
			pendingKills++
		} else if zombies > 0 && rng.Float64() < min(0.9, float64(zombies)/float64(max(1, left))) {
			p.freezeAt = at()
			zombies--
		}
		s.live = p
		return nil
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(15*time.Minute + time.Duration(cfg.Sessions+cfg.Kills)*time.Second)
	for {
		select {
		case <-ctx.Done():
			killAll(sessions)
			return rep, ctx.Err()
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			killAll(sessions)
			return rep, fmt.Errorf("chaos: sessions did not finish in time")
		}
		running := 0
		for _, s := range sessions[:next] {
			if !s.done {
				running++
			}
		}
		for next < len(sessions) && running < cfg.Parallel {
			s := sessions[next]
			if err := launch(s); err != nil {
				return rep, err
			}
			readers[next] = newFollower(c, s.name)
			rwg.Add(1)
			go func(f *follower) { defer rwg.Done(); f.run(readCtx) }(readers[next])
			next++
			running++
		}
		now := time.Now()
		for _, s := range sessions[:next] {
			// Zombies: wake them when due; count their refusals when they exit.
			kept := s.frozen[:0]
			for _, z := range s.frozen {
				if !z.wakeAt.IsZero() && now.After(z.wakeAt) {
					z.cmd.Process.Signal(syscall.SIGCONT)
					z.wakeAt = time.Time{}
				}
				select {
				case <-z.exited:
					switch {
					case z.code == 3 && strings.Contains(z.stderr.String(), "(409)"):
						rep.Closed409++
					case z.code == 3:
						rep.Fenced403++
					case z.code == 0 && strings.Contains(z.stderr.String(), "already finished"):
						rep.ZombieIdle++
					case z.code == 0:
						// Frozen before its claim, it claimed a newer epoch
						// on waking and finished the session; the successor
						// it fenced is refused and replaced by the loop.
						rep.ZombieWon++
					default:
						logf("zombie of %s exited %d: %s", s.name, z.code, lastLine(z.stderr.String()))
					}
					continue
				default:
				}
				kept = append(kept, z)
			}
			s.frozen = kept
			if s.done || s.live == nil {
				continue
			}
			p := s.live
			select {
			case <-p.exited:
				if !p.killAt.IsZero() {
					pendingKills-- // carried out (code -1) or overtaken by the exit
				}
				switch p.code {
				case 0:
					s.done = true
					rep.Completed++
					events++
				case 3:
					// A woken "zombie" that had not claimed its epoch when it
					// froze claimed a newer one and fenced this incarnation:
					// it is the session's live worker now.
					logf("%s: incarnation refused: %s", s.name, lastLine(p.stderr.String()))
					s.live = nil
					for i, z := range s.frozen {
						if z.wakeAt.IsZero() {
							s.live = z
							s.frozen = append(s.frozen[:i], s.frozen[i+1:]...)
							rep.ZombieWon++
							break
						}
					}
					if s.live == nil {
						if err := launch(s); err != nil {
							return rep, err
						}
					}
				default:
					if !p.killAt.IsZero() && p.code == -1 {
						rep.Kills++
						events++
					} else {
						logf("%s: worker exited %d: %s", s.name, p.code, lastLine(p.stderr.String()))
					}
					if err := launch(s); err != nil {
						return rep, err
					}
				}
			default:
				switch {
				case !p.killAt.IsZero() && now.After(p.killAt):
					p.cmd.Process.Signal(syscall.SIGKILL)
					p.killAt = now.Add(time.Hour) // killed; counted when it exits
				case !p.freezeAt.IsZero() && now.After(p.freezeAt):
					p.cmd.Process.Signal(syscall.SIGSTOP)
					p.freezeAt = time.Time{}
					p.zombie = true
					p.wakeAt = now.Add(time.Duration(200+rng.IntN(600)) * time.Millisecond)
					s.frozen = append(s.frozen, p)
					rep.Zombies++
					if err := launch(s); err != nil {
						return rep, err
					}
				}
			}
		}
		if restartEvery > 0 && rep.Restarts < cfg.Restarts && events >= (rep.Restarts+1)*restartEvery {
			down := time.Now()
			logf("killing the log service (restart %d of %d)", rep.Restarts+1, cfg.Restarts)
			svc.kill()
			if svc, err = startService(ctx, cfg.Bin, cfg.DataDir, svc.addr, kafkaPort); err != nil {
				return rep, err
			}
			rep.Restarts++
			rep.ServiceDown += time.Since(down)
		}
		if sk != nil && rep.SinkKills < cfg.SinkKills && events >= (rep.SinkKills+1)*sinkEvery {
			sk.kill()
			rep.SinkKills++
			if sk, err = startSink(cfg, kafkaPort, true); err != nil {
				return rep, err
			}
		}
		allDone := rep.Completed == cfg.Sessions
		for _, s := range sessions {
			if len(s.frozen) > 0 {
				allDone = false
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
		check(ctx, c, cfg, s, readers[i], rep)
	}
	if sk != nil {
		if err := checkSink(ctx, c, cfg, kafkaPort, sk, sessions, rep); err != nil {
			return rep, err
		}
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

func killAll(sessions []*sessionState) {
	for _, s := range sessions {
		if s.live != nil && s.live.cmd.ProcessState == nil {
			s.live.cmd.Process.Kill()
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

// startWorker starts one incarnation of s's session.
func startWorker(cfg Config, url string, s *sessionState) (*proc, error) {
	args := []string{"agent", "run", "--log", url, "--session", s.name, "--seed", fmt.Sprint(s.seed),
		"--delay", cfg.Delay.String(), "--retry-for", "3m", "-v",
		"--temperature", fmt.Sprint(cfg.Model.Temperature), "--no-tool", fmt.Sprint(cfg.Model.NoTool),
		"--p-stall", fmt.Sprint(cfg.Params.PStall), "--p-obs-noise", fmt.Sprint(cfg.Params.PObsNoise)}
	cmd := exec.Command(cfg.Bin, args...)
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, exited: make(chan struct{})}
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
			if tail, ev, ok := strings.Cut(line, "  "); ok && len(tail) > 10 && strings.HasPrefix(ev, "{") {
				s.mu.Lock()
				s.acked[ev] = true
				s.mu.Unlock()
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
	cmd  *exec.Cmd
	url  string
	addr string
	dir  string
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
	logFile, err := os.OpenFile(filepath.Join(dir, "service.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start log service: %w", err)
	}
	go func() { cmd.Wait(); logFile.Close() }()
	s := &service{cmd: cmd, url: "http://" + addr, addr: addr, dir: dir}
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

func (s *service) kill() {
	s.cmd.Process.Kill()
	for s.cmd.ProcessState == nil {
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *service) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		for s.cmd.ProcessState == nil {
			time.Sleep(10 * time.Millisecond)
		}
		close(done)
	}()
	select {
	case <-done:
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
				// dropped connection wraps io.EOF too; that one is retried.)
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
func check(ctx context.Context, c *client.Client, cfg Config, s *sessionState, f *follower, rep *Report) {
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
	want := expected(cfg, s.seed)
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
	s.mu.Lock()
	for ev := range s.acked {
		if seen[ev] == 0 {
			rep.Lost++
		}
	}
	s.mu.Unlock()
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

// expected returns the domain events of the uninterrupted session.
func expected(cfg Config, seed uint64) []string {
	events, _ := session.Uninterrupted(session.Start(cfg.Params, cfg.Model, seed))
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = string(e.Encode())
	}
	return out
}

// asked prints a count of faults beside the number asked for, when fewer
// landed (a session can finish before its planned kill or freeze).
func asked(got, want int) string {
	if got == want {
		return fmt.Sprint(got)
	}
	return fmt.Sprintf("%d (of %d asked: sessions finished first)", got, want)
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
