package sink

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/forklab/forklab/stream/client"
	"github.com/forklab/forklab/stream/kafkalog"
	"github.com/forklab/forklab/stream/server"
	"github.com/forklab/forklab/stream/service"
)

// sessionEvents are the bodies the benchmark's producers append in turn:
// session events of the usual shapes and sizes.
var sessionEvents = []string{
	`{"type":"model_turn","turn":%d,"tool":"increment"}`,
	`{"type":"tool_result","turn":%d,"tool":"increment","obs":3,"steps":4}`,
	`{"type":"model_turn","turn":%d,"tool":"read_sensor"}`,
	`{"type":"tool_result","turn":%d,"tool":"read_sensor","obs":4,"steps":5}`,
}

// sinkChild is a sink running as a child process (the test binary), as
// forklab log sink runs: its memory is its own.
type sinkChild struct {
	cmd  *exec.Cmd
	out  string
	done chan error
}

func startSinkChild(b testing.TB, cs childSpec) *sinkChild {
	spec, _ := json.Marshal(cs)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "FORKLAB_SINK_CHILD="+string(spec))
	cmd.Stderr = nil
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c := &sinkChild{cmd: cmd, out: cs.Out, done: make(chan error, 1)}
	go func() { c.done <- cmd.Wait() }()
	return c
}

// progress reads the committed offset and the events written, summed over
// the state files.
func (c *sinkChild) progress() (next, events int64) {
	paths, _ := filepath.Glob(filepath.Join(c.out, Dir, StateDir, "*.json"))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var st struct {
			Next   int64 `json:"next_offset"`
			Events int64 `json:"events"`
		}
		if json.Unmarshal(b, &st) == nil {
			next += st.Next
			events += st.Events
		}
	}
	return next, events
}

// peakRSS is the child's peak resident memory so far (VmHWM), in bytes.
func (c *sinkChild) peakRSS() int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return -1
}

func (c *sinkChild) stop(b testing.TB) {
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
		b.Fatal("the sink did not stop on SIGTERM")
	}
}

// waitCaughtUp waits until the child has committed every record below
// hwm; it returns when that was.
func (c *sinkChild) waitCaughtUp(b testing.TB, hwm int64, timeout time.Duration) time.Time {
	for deadline := time.Now().Add(timeout); ; time.Sleep(20 * time.Millisecond) {
		if next, _ := c.progress(); next >= hwm {
			return time.Now()
		}
		if time.Now().After(deadline) {
			next, _ := c.progress()
			b.Fatalf("the sink is at offset %d of %d after %s", next, hwm, timeout)
		}
	}
}

// BenchmarkSinkKeepsUp runs the session log as forklab log serve does
// (embedded broker, fsync of every batch) under 16 producers appending
// session events as fast as the log takes them, with forklab log sink
// --follow beside it in a process of its own. It prints the log's appends
// per second (the baseline); the events per second the sink committed over
// the same time (short of the appends by what the last rotation interval
// holds), how far behind it fell at most and how soon after the last
// append it had everything; then the sink's own speed, copying the whole
// log again into a fresh directory, and its peak memory for two rotation
// sizes. SINK_BENCH_SECONDS sets the load's length (default 10).
func BenchmarkSinkKeepsUp(b *testing.B) {
	secs := 10
	if s := os.Getenv("SINK_BENCH_SECONDS"); s != "" {
		secs, _ = strconv.Atoi(s)
	}
	for range b.N {
		dir := b.TempDir()
		svc, err := service.Start(context.Background(), service.Config{
			Addr: "127.0.0.1:0", DataDir: dir,
			Log:    kafkalog.Config{Logf: func(string, ...any) {}},
			Server: server.Config{LongPollTimeout: time.Second},
		})
		if err != nil {
			b.Fatal(err)
		}
		c := client.New(svc.URL)
		ctx := context.Background()
		const producers = 16
		for p := range producers {
			if _, _, err := c.Create(ctx, fmt.Sprintf("bench/p%02d", p), client.CreateOptions{ContentType: js}); err != nil {
				b.Fatal(err)
			}
		}
		out := b.TempDir()
		follow := startSinkChild(b, childSpec{Brokers: svc.Brokers, Out: out, Follow: true, RotateRecords: 10000, RotateInterval: time.Second})
		var appended atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		end := start.Add(time.Duration(secs) * time.Second)
		for p := range producers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a := c.NewAppender(fmt.Sprintf("bench/p%02d", p), "p", 0, js)
				for i := 0; time.Now().Before(end); i++ {
					if _, err := a.Append(ctx, []byte(fmt.Sprintf(sessionEvents[i%len(sessionEvents)], i/2+1))); err != nil {
						b.Error(err)
						return
					}
					appended.Add(1)
				}
			}()
		}
		// Sample how far behind the sink's commits are, in records.
		rd := kafkalog.NewReader(svc.Brokers, "forklab.streams")
		var maxLag int64
		sampling := make(chan struct{})
		go func() {
			defer close(sampling)
			for time.Now().Before(end) {
				time.Sleep(100 * time.Millisecond)
				if _, h, err := rd.Offsets(ctx, 0); err == nil {
					next, _ := follow.progress()
					maxLag = max(maxLag, h-next)
				}
			}
		}()
		wg.Wait()
		stopped := time.Now()
		<-sampling
		_, written := follow.progress()
		_, hwm, err := rd.Offsets(ctx, 0)
		if err != nil {
			b.Fatal(err)
		}
		caught := follow.waitCaughtUp(b, hwm, time.Minute)
		followRSS := follow.peakRSS()
		follow.stop(b)
		elapsed := stopped.Sub(start).Seconds()
		appendRate := float64(appended.Load()) / elapsed
		writeRate := float64(written) / elapsed
		_, total := follow.progress()

		// The sink's own speed: the same log again, one-shot, into a
		// fresh directory; then twice the log, for memory.
		catchUp := func(rotate int) (float64, int64, int64) {
			o := b.TempDir()
			t0 := time.Now()
			ch := startSinkChild(b, childSpec{Brokers: svc.Brokers, Out: o, RotateRecords: rotate})
			var peak int64
			for {
				select {
				case err := <-ch.done:
					if err != nil {
						b.Fatalf("catch-up sink: %v", err)
					}
					_, ev := ch.progress()
					return float64(ev) / time.Since(t0).Seconds(), peak, ev
				case <-time.After(5 * time.Millisecond):
					peak = max(peak, ch.peakRSS())
				}
			}
		}
		rate, rss10k, events := catchUp(10000)
		_, rss1k, _ := catchUp(1000)
		b.StopTimer()
		svc.Close(ctx)

		fmt.Printf("log appends: %d producers, one session event (~60 B) per append, each acknowledged by Kafka and fsynced: %.0f appends/s over %.1fs\n",
			producers, appendRate, elapsed)
		fmt.Printf("sink --follow beside it (--rotate-records 10000, --rotate-interval 1s): %.0f events/s committed to Parquet over the same time (%.2f× the append rate); "+
			"at most %d records (%.0f ms of appends) behind, caught up %.0f ms after the last append; %d events in all; peak memory %.1f MiB\n",
			writeRate, writeRate/appendRate, maxLag, float64(maxLag)/appendRate*1000, caught.Sub(stopped).Seconds()*1000, total, float64(followRSS)/(1<<20))
		fmt.Printf("sink catch-up, the same %d events into a fresh directory: %.0f events/s (%.1f× the log's append rate); peak memory %.1f MiB with --rotate-records 10000, %.1f MiB with 1000\n",
			events, rate, rate/appendRate, float64(rss10k)/(1<<20), float64(rss1k)/(1<<20))
		b.ReportMetric(appendRate, "appends/s")
		b.ReportMetric(writeRate, "sink-events/s")
		b.ReportMetric(rate, "catchup-events/s")
	}
}
