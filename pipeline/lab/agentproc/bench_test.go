package agentproc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/forklab/forklab/pipeline/lab/agentproc"
	"github.com/forklab/forklab/pipeline/lab/sweep"
)

func benchSeeds(b *testing.B) uint64 {
	if s := os.Getenv("BENCH_AGENT_SEEDS"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n == 0 {
			b.Fatalf("BENCH_AGENT_SEEDS=%q: want a positive integer", s)
		}
		return n
	}
	return 100_000
}

// forklabBinary is FORKLAB_BIN (make bench-agent passes bin/forklab), or a
// forklab built for the benchmark.
func forklabBinary(b *testing.B) string {
	if p := os.Getenv("FORKLAB_BIN"); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			b.Fatal(err)
		}
		return abs
	}
	p := filepath.Join(b.TempDir(), "forklab")
	cmd := exec.Command("go", "build", "-o", p, "./cmd/forklab")
	cmd.Dir = "../../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build forklab: %v: %s", err, out)
	}
	return p
}

// BenchmarkAgentProtocol measures the protocol's overhead, in one run:
//
//   - the seed's reference core in process (testdata/seed/seed_reference.py)
//     over BENCH_AGENT_SEEDS seeds (default 100,000) at fork step 3: pairs/s;
//   - the same seeds swept through forklab-agent/1 with the reference core
//     as an agent (examples/agents/seed_core.py, batches of 64 seeds) and
//     --parallel 2, Parquet files included: pairs/s, and the ratio to the
//     reference core (target: at least 0.5);
//   - the same sweep through forklab agent serve --world counter, --parallel
//     2: JSON-RPC requests answered per second (start and branch; the
//     runner sends them in batch lines).
//
// The label counts of both sweeps are checked against the reference core's.
// Beside each wall-clock figure it reports one from CPU time (the process's
// and its agents'), which a busy machine skews less: x_reference_cpu is the
// reference core's CPU seconds against half the protocol's (two processes
// on two cores).
func BenchmarkAgentProtocol(b *testing.B) {
	n := benchSeeds(b)
	py, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		b.Skip("python3 is not installed")
	}
	python := strings.TrimSpace(string(py))
	bin := forklabBinary(b)
	spec := sweep.DefaultSpec()
	spec.Seeds = sweep.Range{Start: 0, End: n}
	for b.Loop() {
		// The reference core, in process.
		start := time.Now()
		refCmd := exec.Command(python, "../../../testdata/seed/seed_reference.py", "--seeds", fmt.Sprint(n), "--fork-at", "3", "--json")
		out, err := refCmd.Output()
		if err != nil {
			b.Fatal(err)
		}
		refRate := float64(n) / time.Since(start).Seconds()
		refCPU := (refCmd.ProcessState.UserTime() + refCmd.ProcessState.SystemTime()).Seconds()
		var ref struct {
			Total map[string]int64 `json:"total"`
		}
		if err := json.Unmarshal(out, &ref); err != nil {
			b.Fatal(err)
		}
		// The reference core through the protocol.
		def, err := agentproc.Open(context.Background(), agentproc.Config{Parallel: 2,
			Command: agentproc.Command{Line: python + " ../../../examples/agents/seed_core.py"}})
		if err != nil {
			b.Fatal(err)
		}
		cpu0 := cpuSeconds()
		start = time.Now()
		_, res, err := sweepWith(b, spec, def, "", false, sweep.Options{Workers: 2})
		elapsed := time.Since(start)
		def.Close()
		protoCPU := cpuSeconds() - cpu0
		if err != nil {
			b.Fatal(err)
		}
		if l := res.Labels[0]; l.Rescued != ref.Total["rescue"] || l.Harmed != ref.Total["harm"] || l.Unchanged != ref.Total["unchanged"] {
			b.Fatalf("through the protocol %+v, the reference core %v", l, ref.Total)
		}
		rate := float64(n) / elapsed.Seconds()
		// A built-in world served by forklab agent serve.
		served, err := agentproc.Open(context.Background(), agentproc.Config{Parallel: 2,
			Command: agentproc.Command{Line: strconv.Quote(bin) + " agent serve --world counter"}})
		if err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		_, res, err = sweepWith(b, spec, served, "", false, sweep.Options{Workers: 2})
		servedTime := time.Since(start)
		st := served.Pool().Stats()
		served.Close()
		if err != nil {
			b.Fatal(err)
		}
		if l := res.Labels[0]; l.Rescued != ref.Total["rescue"] || l.Harmed != ref.Total["harm"] {
			b.Fatalf("served counter %+v, the reference core %v", l, ref.Total)
		}
		requests := st.Requests[agentproc.MethodStart] + st.Requests[agentproc.MethodBranch]
		b.ReportMetric(rate, "pairs/s")
		b.ReportMetric(refRate, "reference_pairs/s")
		b.ReportMetric(rate/refRate, "x_reference")
		b.ReportMetric(refCPU/(protoCPU/2), "x_reference_cpu")
		b.ReportMetric(float64(requests)/servedTime.Seconds(), "serve_requests/s")
		b.ReportMetric(float64(n)/servedTime.Seconds(), "serve_pairs/s")
		b.ReportMetric(0, "ns/op")
		b.Logf("%d seeds: reference core in process %.0f pairs/s (%.2f CPU s); through forklab-agent/1 with --parallel 2 %.0f pairs/s (%.2f CPU s, forklab and agents): %.2fx wall, %.2fx CPU (target 0.5x); forklab agent serve --world counter: %d requests in %.2fs, %.0f requests/s",
			n, refRate, refCPU, rate, protoCPU, rate/refRate, refCPU/(protoCPU/2), requests, servedTime.Seconds(), float64(requests)/servedTime.Seconds())
	}
}

// cpuSeconds is the user and system time of this process and of its
// children that have been waited for.
func cpuSeconds() float64 {
	var self, kids syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
}
