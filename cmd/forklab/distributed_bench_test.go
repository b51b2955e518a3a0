package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/segmentio/kafka-go"
)

// cpuOf is the user and system CPU time of an exited process.
func cpuOf(c *exec.Cmd) time.Duration {
	if c.ProcessState == nil {
		return 0
	}
	return c.ProcessState.UserTime() + c.ProcessState.SystemTime()
}

// waitMembers waits until the consumer group has n members and is stable.
func waitMembers(tb testing.TB, broker, group string, n int) {
	tb.Helper()
	c := &kafka.Client{Addr: kafka.TCP(broker), Timeout: 5 * time.Second}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		res, err := c.DescribeGroups(context.Background(), &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
		if err == nil && len(res.Groups) == 1 && res.Groups[0].GroupState == "Stable" && len(res.Groups[0].Members) == n {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	tb.Fatalf("group %s did not reach %d stable members", group, n)
}

// BenchmarkDistributed prints the throughput of a distributed sweep of the
// counter world with 1, 2 and 4 worker processes (each running one unit
// per CPU) on the embedded broker, against the single-process sweep of the
// same seeds: wall time from the coordinator's start to its exit (publish,
// run, finalize with the manifest's checksums, results.duckdb, as forklab
// sweep does), seeds per second, the ratio to the single process, and the
// CPU seconds of every process involved (coordinator, workers, broker).
// BENCH_DIST_SEEDS sets the seeds (default 4,000,000: 31 units),
// BENCH_DIST_COUNT how many times each runs (default 3; the best counts).
// make bench-distributed.
func BenchmarkDistributed(b *testing.B) {
	env := func(name string, def int) int {
		s := os.Getenv(name)
		if s == "" {
			return def
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want a positive integer", name, s)
		}
		return n
	}
	seeds, count := env("BENCH_DIST_SEEDS", 4_000_000), env("BENCH_DIST_COUNT", 3)
	seedArg := fmt.Sprintf("0:%d", seeds)
	type row struct {
		name      string
		wall, cpu time.Duration
	}
	var rows []row
	for i := 0; i < count*b.N; i++ {
		dir := b.TempDir()
		// The single process, one worker goroutine per CPU.
		start := time.Now()
		single := exec.Command(forklabBin, "sweep", "--seeds", seedArg, "--out", filepath.Join(dir, "single"), "-q")
		single.Stderr = os.Stderr
		if err := single.Run(); err != nil {
			b.Fatal(err)
		}
		rows = append(rows, row{"single process", time.Since(start), cpuOf(single)})
		for _, n := range []int{1, 2, 4} {
			broker, stop := benchBroker(b)
			queue := fmt.Sprintf("bench%d", n)
			var workers []*exec.Cmd
			for k := range n {
				w := exec.Command(forklabBin, "worker", "--brokers", broker, "--queue", queue, "--id", fmt.Sprintf("w%d", k), "-q")
				w.Stderr = os.Stderr
				if err := w.Start(); err != nil {
					b.Fatal(err)
				}
				workers = append(workers, w)
			}
			waitMembers(b, broker, queue+".workers", n*runtime.NumCPU())
			start := time.Now()
			coord := exec.Command(forklabBin, "sweep", "--distributed", "--brokers", broker, "--queue", queue,
				"--seeds", seedArg, "--out", filepath.Join(dir, fmt.Sprintf("dist%d", n)), "-q")
			coord.Stderr = os.Stderr
			if err := coord.Run(); err != nil {
				b.Fatal(err)
			}
			wall := time.Since(start)
			cpu := cpuOf(coord)
			for _, w := range workers {
				w.Process.Signal(syscall.SIGTERM)
				w.Wait()
				cpu += cpuOf(w)
			}
			cpu += stop()
			rows = append(rows, row{fmt.Sprintf("%d worker%s", n, map[bool]string{true: "s"}[n > 1]), wall, cpu})
		}
	}
	// Best of the b.N runs of each.
	best := map[string]row{}
	var order []string
	for _, r := range rows {
		if o, ok := best[r.name]; !ok || r.wall < o.wall {
			if !ok {
				order = append(order, r.name)
			}
			best[r.name] = r
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	spec := sweep.DefaultSpec()
	spec.Seeds = sweep.Range{End: uint64(seeds)}
	fmt.Printf("distributed sweep of the counter world, %d seeds (units of %d), embedded broker, %d CPUs, load %s; best of %d:\n",
		seeds, spec.ShardSeeds(), runtime.NumCPU(), strings.Join(strings.Fields(string(load))[:3], " "), count*b.N)
	base := best["single process"]
	for _, name := range order {
		r := best[name]
		rate := float64(seeds) / r.wall.Seconds()
		how := "(--workers " + strconv.Itoa(runtime.NumCPU()) + ")"
		if name != "single process" {
			how = "(--parallel " + strconv.Itoa(runtime.NumCPU()) + " each)"
		}
		fmt.Printf("  %-15s %-22s %7.2f s  %6.2f M seeds/s  %5.2f× the single process  CPU %6.2f s\n",
			name, how, r.wall.Seconds(), rate/1e6, base.wall.Seconds()/r.wall.Seconds(), r.cpu.Seconds())
		key := strings.ReplaceAll(name, " ", "_")
		b.ReportMetric(rate, key+"_seeds/s")
	}
	b.ReportMetric(0, "ns/op")
}

// benchBroker starts forklab log serve's embedded broker and returns its
// address and a stop that returns the broker's CPU time.
func benchBroker(b *testing.B) (string, func() time.Duration) {
	dir := b.TempDir()
	port := freePort(b)
	cmd := exec.Command(forklabBin, "log", "serve", "--addr", "127.0.0.1:"+freePort(b), "--kafka-port", port, "--data-dir", dir, "--quiet")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	addr := "127.0.0.1:" + port
	waitTCP(b, addr)
	return addr, func() time.Duration {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		return cpuOf(cmd)
	}
}
