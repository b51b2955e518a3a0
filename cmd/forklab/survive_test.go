package main

import (
	"bytes"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// killableLog is forklab log serve as its own process, on fixed ports,
// its embedded broker persisted to a data directory: SIGKILLed and
// started again, it serves the same streams.
type killableLog struct {
	t    *testing.T
	args []string
	url  string
	proc *proc
}

func startKillableLog(t *testing.T) *killableLog {
	t.Helper()
	port := freePort(t)
	l := &killableLog{t: t, url: "http://127.0.0.1:" + port,
		args: []string{"log", "serve", "--addr", "127.0.0.1:" + port, "--kafka-port", freePort(t), "--data-dir", t.TempDir(), "--quiet"}}
	l.start()
	t.Cleanup(func() { l.proc.cmd.Process.Signal(syscall.SIGTERM); <-l.proc.done })
	return l
}

func (l *killableLog) start() {
	l.t.Helper()
	l.proc = startProc(l.t, "log serve", l.args...)
	l.proc.waitUp(l.t, func() bool {
		res, err := http.Get(l.url + "/v1/stream/")
		if err == nil {
			res.Body.Close()
		}
		return err == nil
	})
}

// restart SIGKILLs the log mid-work and starts it again after down.
func (l *killableLog) restart(down time.Duration) {
	l.proc.cmd.Process.Signal(syscall.SIGKILL)
	<-l.proc.done
	time.Sleep(down)
	l.start()
}

// forklab sweep --from-log and forklab agent run ride out the session log
// SIGKILLed and started again in the middle of their work: they retry
// with backoff (a sweep's look-ups too: before, the first failed one
// ended it) and end as if nothing happened — the sweep with the in-memory
// sweep's files, the session with the outcome, events and tail of an
// uninterrupted one, in one incarnation.
func TestLogClientsSurviveLogRestart(t *testing.T) {
	l := startKillableLog(t)
	args := []string{"--seeds", "0:48", "--fork-at", "2,3", "--p-stall", "0.2", "-q"}
	mem := filepath.Join(t.TempDir(), "mem")
	mustRun(t, append([]string{"sweep", "--out", mem}, args...)...)
	// The uninterrupted session, for comparison.
	want := mustRun(t, "agent", "run", "--log", l.url, "--session", "calm", "--seed", "7")

	out := filepath.Join(t.TempDir(), "out")
	sw := startProc(t, "sweep", append([]string{"sweep", "--from-log", l.url, "--log-prefix", "restart", "--out", out, "--retry-for", "1m"}, args...)...)
	ag := &proc{name: "agent", cmd: exec.Command(forklabBin, "agent", "run", "--log", l.url, "--session", "stormy", "--seed", "7", "--delay", "300ms", "--retry-for", "1m"),
		errb: &bytes.Buffer{}, done: make(chan struct{})}
	var agOut bytes.Buffer
	ag.cmd.Stderr, ag.cmd.Stdout = ag.errb, &agOut
	if err := ag.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { ag.err = ag.cmd.Wait(); close(ag.done) }()
	time.Sleep(1500 * time.Millisecond)
	if sw.exited() || ag.exited() {
		t.Fatalf("done before the log was killed: make them longer (sweep %v, agent %v)", sw.err, ag.err)
	}
	// Down for longer than an Appender's own retries (8 attempts, about
	// 5s): the callers' retry loops must carry them over.
	l.restart(8 * time.Second)
	for _, p := range []*proc{sw, ag} {
		select {
		case <-p.done:
		case <-time.After(3 * time.Minute):
			t.Fatalf("%s did not finish within 3 minutes of the restart: %s", p.name, p.errb)
		}
		if p.err != nil {
			t.Fatalf("%s: %v: %s", p.name, p.err, p.errb)
		}
	}
	sameSweep(t, mem, out, false)
	if !strings.Contains(ag.errb.String(), "session log unavailable") {
		t.Errorf("agent run did not meet the restart (it said no retry): %s", ag.errb)
	}
	// The same outcome, steps and events, in one incarnation (the tail
	// offset counts the incarnation event's bytes: its pid and time).
	outcome := func(s string) string { o, _, _ := strings.Cut(s, " · tail "); return o }
	if got := strings.ReplaceAll(outcome(agOut.String()), "stormy", "calm"); got != outcome(want) {
		t.Errorf("the interrupted session ended %q, the uninterrupted %q", got, outcome(want))
	}
}
