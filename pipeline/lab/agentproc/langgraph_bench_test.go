package agentproc_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkAgentLangGraph measures the LangGraph example
// (examples/agents/langgraph, whose npm packages make bench-agent installs)
// through forklab against the same experiment done with LangGraph's own
// time travel in one Node process (timetravel.mjs: each seed's run played
// to its end, the fork found with getStateHistory, each arm forked with
// updateState and invoke), in one run, on the same seeds
// (BENCH_LANGGRAPH_SEEDS, default 600) at fork step 2 with arms off, on,
// placebo and aa:
//
//   - pairs/s of `forklab sweep --agent 'node agent.mjs' --parallel P`,
//     P the CPU count (BENCH_LANGGRAPH_PARALLEL), Parquet files included;
//   - pairs/s of the time travel, and the ratio (target: at least 0.8);
//   - CPU seconds of each (forklab's with its agents'), and their ratio,
//     which a busy machine skews less.
//
// Both are timed as whole commands, Node's start-up included. The label
// counts of both must be equal: it is the same experiment.
func BenchmarkAgentLangGraph(b *testing.B) {
	node, err := exec.LookPath("node")
	if err != nil {
		b.Skip("node is not installed")
	}
	dir, err := filepath.Abs("../../../examples/agents/langgraph")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@langchain", "langgraph")); err != nil {
		b.Skipf("the LangGraph example's packages are not installed: cd %s && npm ci (make bench-agent does)", dir)
	}
	seeds := 600
	if s := os.Getenv("BENCH_LANGGRAPH_SEEDS"); s != "" {
		if seeds, err = strconv.Atoi(s); err != nil || seeds <= 0 {
			b.Fatalf("BENCH_LANGGRAPH_SEEDS=%q: want a positive integer", s)
		}
	}
	parallel := runtime.NumCPU()
	if s := os.Getenv("BENCH_LANGGRAPH_PARALLEL"); s != "" {
		if parallel, err = strconv.Atoi(s); err != nil || parallel <= 0 {
			b.Fatalf("BENCH_LANGGRAPH_PARALLEL=%q: want a positive integer", s)
		}
	}
	bin := forklabBinary(b)
	const arms = "off,on,placebo,aa"
	for b.Loop() {
		// LangGraph's own time travel, in one process.
		cpu0 := cpuSeconds()
		start := time.Now()
		tt := exec.Command(node, "timetravel.mjs", "--seeds", fmt.Sprintf("0:%d", seeds), "--fork-at", "2", "--arms", arms)
		tt.Dir = dir
		out, err := tt.Output()
		if err != nil {
			b.Fatalf("timetravel.mjs: %v", err)
		}
		ttTime := time.Since(start)
		ttCPU := cpuSeconds() - cpu0
		var ref struct {
			Pairs  int                       `json:"pairs"`
			Labels map[string]map[string]int `json:"labels"`
		}
		if err := json.Unmarshal(out, &ref); err != nil {
			b.Fatalf("timetravel.mjs printed %q: %v", out, err)
		}
		// The same experiment through forklab.
		sweepOut := filepath.Join(b.TempDir(), "lg")
		cpu0 = cpuSeconds()
		start = time.Now()
		sw := exec.Command(bin, "sweep", "--agent", node+" "+filepath.Join(dir, "agent.mjs"), "--parallel", strconv.Itoa(parallel),
			"--seeds", fmt.Sprintf("0:%d", seeds), "--fork-at", "2", "--arms", arms, "--out", sweepOut, "-q")
		if msg, err := sw.CombinedOutput(); err != nil {
			b.Fatalf("forklab sweep: %v\n%s", err, msg)
		}
		fkTime := time.Since(start)
		fkCPU := cpuSeconds() - cpu0
		counts, err := exec.Command(bin, "sql", sweepOut, "SELECT arm, label, count(*) AS n FROM pairs GROUP BY ALL ORDER BY ALL", "--format", "csv").Output()
		if err != nil {
			b.Fatal(err)
		}
		got := map[string]map[string]int{}
		for _, l := range strings.Split(strings.TrimSpace(string(counts)), "\n")[1:] {
			f := strings.Split(l, ",")
			n, _ := strconv.Atoi(f[2])
			if got[f[0]] == nil {
				got[f[0]] = map[string]int{}
			}
			got[f[0]][f[1]] = n
		}
		for arm, want := range ref.Labels {
			for label, n := range want {
				if got[arm][label] != n {
					b.Fatalf("forklab's labels %v, LangGraph's time travel %v: not the same experiment", got, ref.Labels)
				}
			}
		}
		fkRate := float64(ref.Pairs) / fkTime.Seconds()
		ttRate := float64(ref.Pairs) / ttTime.Seconds()
		b.ReportMetric(fkRate, "pairs/s")
		b.ReportMetric(ttRate, "timetravel_pairs/s")
		b.ReportMetric(fkRate/ttRate, "x_timetravel")
		b.ReportMetric(ttCPU/fkCPU, "x_timetravel_cpu")
		b.ReportMetric(0, "ns/op")
		b.Logf("%d seeds, %d pairs: LangGraph's time travel in one Node process %.1f pairs/s (%.1fs, %.1f CPU s); forklab sweep of the LangGraph example with --parallel %d %.1f pairs/s (%.1fs, %.1f CPU s, forklab and agents): %.2fx wall (target 0.8x), %.2fx CPU",
			seeds, ref.Pairs, ttRate, ttTime.Seconds(), ttCPU, parallel, fkRate, fkTime.Seconds(), fkCPU, fkRate/ttRate, ttCPU/fkCPU)
	}
}
