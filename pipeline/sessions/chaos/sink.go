package chaos

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"time"

	"github.com/forklab/forklab/internal/caplog"
	"github.com/forklab/forklab/pipeline/sessions/sink"
	"github.com/forklab/forklab/stream/client"
	"github.com/forklab/forklab/stream/kafkalog"
)

// sinkProc is a forklab log sink process beside the run.
type sinkProc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// startSink starts forklab log sink on the run's sessions: with follow, as
// the run's companion (small batches, frequent rotations, so kills land in
// every phase of a commit); without, the one-shot run after the end.
func startSink(cfg Config, kafkaPort int, follow bool) (*sinkProc, error) {
	args := []string{"log", "sink", "--out", cfg.SinkOut, "--brokers", fmt.Sprintf("127.0.0.1:%d", kafkaPort),
		"--prefix", fmt.Sprintf("chaos-%d/", cfg.Seed), "--rotate-records", "50"}
	if follow {
		args = append(args, "--follow", "--rotate-interval", "200ms")
	}
	if err := os.MkdirAll(cfg.SinkOut, 0o755); err != nil {
		return nil, err
	}
	logFile, err := caplog.Open(filepath.Join(cfg.DataDir, "sink.log"), false)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(cfg.Bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start sink: %w", err)
	}
	p := &sinkProc{cmd: cmd, exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); logFile.Close(); close(p.exited) }()
	return p, nil
}

// kill sends SIGKILL and waits for the process to end.
func (p *sinkProc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// checkSink lets the sink catch up with the log, stops it, runs it once
// more (which must write nothing), and compares its files with the log
// stream by stream.
func checkSink(ctx context.Context, c *client.Client, cfg Config, kafkaPort int, sk *sinkProc, sessions []*sessionState, rep *Report) error {
	brokers := []string{fmt.Sprintf("127.0.0.1:%d", kafkaPort)}
	rd := kafkalog.NewReader(brokers, "forklab.streams")
	defer rd.Close()
	n, err := rd.Partitions(ctx)
	if err != nil {
		return fmt.Errorf("sink check: %w", err)
	}
	hwm := map[int32]int64{}
	for p := int32(0); p < int32(n); p++ {
		if _, hwm[p], err = rd.Offsets(ctx, p); err != nil {
			return fmt.Errorf("sink check: %w", err)
		}
	}
	for deadline := time.Now().Add(2 * time.Minute); ; {
		pos, err := sink.Progress(cfg.SinkOut, "forklab.streams")
		if err != nil {
			return err
		}
		behind := false
		for p, h := range hwm {
			if pos[p] < h {
				behind = true
			}
		}
		if !behind {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the sink did not catch up with the log in 2 minutes (at %v of %v; see %s)", pos, hwm, filepath.Join(cfg.DataDir, "sink.log"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-sk.exited:
			return fmt.Errorf("the sink exited: %v (see %s)", sk.err, filepath.Join(cfg.DataDir, "sink.log"))
		case <-time.After(50 * time.Millisecond):
		}
	}
	sk.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-sk.exited:
	case <-time.After(30 * time.Second):
		sk.kill()
		return fmt.Errorf("the sink did not stop on SIGTERM")
	}
	if sk.err != nil {
		return fmt.Errorf("the sink ended with %v (see %s)", sk.err, filepath.Join(cfg.DataDir, "sink.log"))
	}

	// Run once more: nothing new, nothing written.
	before, err := listing(cfg.SinkOut)
	if err != nil {
		return err
	}
	again, err := startSink(cfg, kafkaPort, false)
	if err != nil {
		return err
	}
	<-again.exited
	if again.err != nil {
		return fmt.Errorf("the one-shot sink after the end: %v (see %s)", again.err, filepath.Join(cfg.DataDir, "sink.log"))
	}
	after, err := listing(cfg.SinkOut)
	if err != nil {
		return err
	}
	rep.SinkRerun = "nothing"
	if !reflect.DeepEqual(before, after) {
		rep.SinkRerun = fmt.Sprintf("%d files changed or added", diffCount(before, after))
	}

	got, err := sink.ReadDir(cfg.SinkOut)
	if err != nil {
		return err
	}
	rep.SinkProblems = len(got.Problems)
	for _, p := range got.Problems {
		rep.Problems = append(rep.Problems, "sink: "+p)
	}
	for _, rs := range got.Streams {
		rep.SinkEvents += len(rs)
	}
	for _, s := range sessions {
		ch, _, err := c.ReadAll(ctx, s.name, client.Start)
		if err != nil {
			return fmt.Errorf("sink check: read %s: %w", s.name, err)
		}
		msgs, err := client.Chunk{Data: ch}.Messages()
		if err != nil {
			return fmt.Errorf("sink check: %s: %w", s.name, err)
		}
		var want, have []string
		for _, m := range msgs {
			want = append(want, string(m))
		}
		for _, r := range got.Latest(s.name) {
			have = append(have, r.Event)
		}
		if strings.Join(want, "\n") != strings.Join(have, "\n") {
			rep.SinkDiffering++
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: the sink holds %d events, the log %d; first difference: %s",
				s.name, len(have), len(want), firstDiff(have, want)))
		}
	}
	return nil
}

// listing maps every file under dir but the sink's lock file to its size
// and modification time.
func listing(dir string) (map[string]string, error) {
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == sink.LockName {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		m[p] = fmt.Sprint(fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	return m, err
}

func diffCount(a, b map[string]string) int {
	n := 0
	for k, v := range b {
		if a[k] != v {
			n++
		}
	}
	return n
}
