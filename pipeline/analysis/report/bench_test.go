package report

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/forklab/forklab/pipeline/analysis/results"
	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	_ "github.com/forklab/forklab/pipeline/worlds/counter"
	"github.com/forklab/forklab/pipeline/worlds/toolloop"
)

// benchSeeds reads a seed count from the environment, or returns def.
func benchSeeds(b *testing.B, env string, def uint64) uint64 {
	if v := os.Getenv(env); v != "" {
		n, err := strconv.ParseUint(v, 10, 63)
		if err != nil || n == 0 {
			b.Fatalf("%s=%q: want a positive integer", env, v)
		}
		return n
	}
	return def
}

var (
	referenceOnce sync.Once
	referenceRate float64 // pairs per second of the Python reference core
	referenceErr  error
)

// referencePairsPerSecond times the seed's reference core
// (testdata/seed/seed_reference.py, a copy of
// ../shared/reference/seed_reference.py) over seeds [0, n) at fork step 3.
func referencePairsPerSecond(n uint64) (float64, error) {
	referenceOnce.Do(func() {
		py, err := exec.LookPath("python3")
		if err != nil {
			referenceErr = err
			return
		}
		cmd := exec.Command(py, "../../../testdata/seed/seed_reference.py", "--seeds", fmt.Sprint(n), "--fork-at", "3", "--json")
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			referenceErr = fmt.Errorf("reference core: %v: %s", err, out)
			return
		}
		referenceRate = float64(n) / time.Since(start).Seconds()
	})
	return referenceRate, referenceErr
}

// BenchmarkSweepEndToEnd runs the seed's experiment over BENCH_SEEDS seeds
// (default 1,000,000) with one worker per CPU: simulation, Parquet writing,
// and the DuckDB summary read back from the files. It reports pairs per
// second, the reference core's pairs per second on the same seeds, and the
// ratio (target: 30); beside them the seconds per run of the sweep and of
// the summary (open included), and the process's CPU seconds per run (on a
// busy machine, CPU time says more than wall time).
func BenchmarkSweepEndToEnd(b *testing.B) {
	n := benchSeeds(b, "BENCH_SEEDS", 1_000_000)
	spec := sweep.DefaultSpec()
	spec.Seeds = sweep.Range{Start: 0, End: n}
	counterRate = sweepEndToEnd(b, spec)
	ref, err := referencePairsPerSecond(n)
	if err != nil {
		b.Logf("no reference figure: %v", err)
		return
	}
	b.ReportMetric(ref, "reference_pairs/s")
	b.ReportMetric(counterRate/ref, "x_reference")
}

// counterRate is the pairs per second BenchmarkSweepEndToEnd measured, for
// BenchmarkSweepToolloop's ratio.
var counterRate float64

// BenchmarkSweepToolloop is BenchmarkSweepEndToEnd for the toolloop world
// (issue 10: its pairs per second beside the counter's): BENCH_TOOLLOOP_SEEDS
// seeds (default 100,000) forked at turn 2 into arms off and on, one
// replica, the fake model's defaults — the counter benchmark's shape, so
// that pairs per second compare. BENCH_TOOLLOOP_SPEC names a spec file to
// sweep instead (testdata/specs/toolloop.yaml is make sweep-toolloop's: four
// arms, five replicas, a noisy model), its seeds replaced. x_counter is the
// ratio to the counter's pairs per second when both run in one invocation.
func BenchmarkSweepToolloop(b *testing.B) {
	n := benchSeeds(b, "BENCH_TOOLLOOP_SEEDS", 100_000)
	spec := sweep.DefaultSpec()
	spec.World = toolloop.Name
	spec.ForkAt = []int{2}
	if path := os.Getenv("BENCH_TOOLLOOP_SPEC"); path != "" {
		var err error
		if spec, err = sweep.ReadSpecFile(path, spec); err != nil {
			b.Fatal(err)
		}
	}
	spec.Seeds = sweep.Range{Start: 0, End: n}
	rate := sweepEndToEnd(b, spec)
	if counterRate > 0 {
		b.ReportMetric(rate/counterRate, "x_counter")
	}
}

// sweepEndToEnd runs spec's sweep and the DuckDB summary over it once per
// iteration and reports pairs per second end to end (pairs/s, counting
// every fork step and treatment arm) and of the sweep alone
// (sweep_pairs/s), the sweep's and the summary's seconds per run and the
// process's CPU seconds per run; it returns the end-to-end pairs per
// second.
func sweepEndToEnd(b *testing.B, spec sweep.Spec) float64 {
	ctx := context.Background()
	var sweepTime, summaryTime time.Duration
	resolved, err := spec.Resolve()
	if err != nil {
		b.Fatal(err)
	}
	pairs := spec.Seeds.Len() * uint64(len(resolved.Configs)*len(spec.ForkAt)*(len(resolved.Plan().Arms)-1))
	cpu0 := cpuSeconds()
	for b.Loop() {
		out := filepath.Join(b.TempDir(), "out")
		start := time.Now()
		st, err := sweep.Stage(out, false, false)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := sweep.Run(ctx, resolved, st, sweep.Options{}); err != nil {
			st.Release()
			b.Fatal(err)
		}
		swept := time.Now()
		db, err := results.Open(ctx, out)
		if err != nil {
			b.Fatal(err)
		}
		t, err := db.Run(ctx, "summary")
		db.Close()
		if err != nil || len(t.Rows) == 0 {
			b.Fatalf("summary: %v, %d rows", err, len(t.Rows))
		}
		var counted uint64
		for _, r := range t.Rows {
			c, err := strconv.ParseUint(fmt.Sprint(r[3]), 10, 64)
			if err != nil {
				b.Fatalf("summary pairs %v: %v", r[3], err)
			}
			counted += c
		}
		if counted != pairs {
			b.Fatalf("summary counts %d pairs, want %d", counted, pairs)
		}
		sweepTime += swept.Sub(start)
		summaryTime += time.Since(swept)
	}
	cpu := cpuSeconds() - cpu0
	rate := float64(pairs) * float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "pairs/s")
	b.ReportMetric(float64(pairs)*float64(b.N)/sweepTime.Seconds(), "sweep_pairs/s")
	b.ReportMetric(sweepTime.Seconds()/float64(b.N), "sweep_s/op")
	b.ReportMetric(summaryTime.Seconds()/float64(b.N), "summary_s/op")
	b.ReportMetric(cpu/float64(b.N), "cpu_s/op")
	b.ReportMetric(0, "ns/op")
	b.StopTimer()
	return rate
}

// cpuSeconds returns the CPU time, user and system, this process has used.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// BenchmarkTranscripts prices transcripts (issue 24: recording them may
// cost the built-in sweep at most 10% of its pairs per second, or they
// are optional): the default counter sweep over BENCH_TRANSCRIPT_SEEDS
// seeds (default 1,000,000) and the toolloop sweep of
// BenchmarkSweepToolloop over a tenth of them, each run without and with
// --transcripts in turn, so that a drifting machine skews both alike. It
// reports each world's pairs per second without (pairs/s) and with
// (transcripts_pairs/s) from wall time, the ratio with/without
// (x_with_transcripts), the same ratio from CPU seconds (x_cpu: the figure
// to trust on a busy machine), and the bytes of the branches table each way.
// Measured at 1,000,000 seeds: x_cpu 0.68 for the counter (its branches
// table 0.9 MiB without, 41 MiB with) and 0.48 for toolloop, well past the
// 10%, so transcripts are off by default and forklab show replays a branch
// instead.
func BenchmarkTranscripts(b *testing.B) {
	n := benchSeeds(b, "BENCH_TRANSCRIPT_SEEDS", 1_000_000)
	counter := sweep.DefaultSpec()
	counter.Seeds = sweep.Range{Start: 0, End: n}
	tl := sweep.DefaultSpec()
	tl.World, tl.ForkAt = toolloop.Name, []int{2}
	tl.Seeds = sweep.Range{Start: 0, End: max(1, n/10)}
	for _, spec := range []sweep.Spec{counter, tl} {
		b.Run(spec.World, func(b *testing.B) {
			var wall, cpu, bytes [2]float64
			var pairs uint64
			for b.Loop() {
				for i, on := range []bool{false, true} {
					s := spec
					s.Transcripts = on
					r, err := s.Resolve()
					if err != nil {
						b.Fatal(err)
					}
					pairs = s.Seeds.Len() * uint64(len(r.Configs)*len(s.ForkAt)*(len(r.Plan().Arms)-1))
					out := filepath.Join(b.TempDir(), "out")
					st, err := sweep.Stage(out, false, false)
					if err != nil {
						b.Fatal(err)
					}
					c0, t0 := cpuSeconds(), time.Now()
					res, err := sweep.Run(context.Background(), r, st, sweep.Options{})
					if err != nil {
						st.Release()
						b.Fatal(err)
					}
					wall[i] += time.Since(t0).Seconds()
					cpu[i] += cpuSeconds() - c0
					for _, f := range res.Manifest.Files {
						if strings.HasPrefix(f.Path, "branches/") {
							bytes[i] += float64(f.Bytes)
						}
					}
				}
			}
			runs := float64(b.N)
			b.ReportMetric(float64(pairs)*runs/wall[0], "pairs/s")
			b.ReportMetric(float64(pairs)*runs/wall[1], "transcripts_pairs/s")
			b.ReportMetric(wall[0]/wall[1], "x_with_transcripts")
			b.ReportMetric(cpu[0]/cpu[1], "x_cpu")
			b.ReportMetric(bytes[0]/runs/(1<<20), "branches_MiB")
			b.ReportMetric(bytes[1]/runs/(1<<20), "transcripts_branches_MiB")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkShowAtScale times forklab show (issue 24: under a second on a
// 10-million-seed sweep) in a child process, the whole command from start
// to exit: a sweep of BENCH_SHOW_SEEDS seeds (default 10,000,000; or the
// finished sweep FORKLAB_BENCH_REPORT_DIR, as BenchmarkReportAtScale reads)
// is made once, then each iteration shows five pairs spread over the seed
// range (the first seed, the last, and three between, in other units),
// their steps replayed from the checkpoints. It reports the slowest and the
// median wall seconds of one show, its CPU seconds (user and system: the
// figure a busy machine moves least), and the one-second target over the
// slowest (x_target_1s: above 1, within it).
func BenchmarkShowAtScale(b *testing.B) {
	bin, dir := sweepAtScale(b, "BENCH_SHOW_SEEDS")
	m, err := sweep.ReadManifest(dir)
	if err != nil {
		b.Fatal(err)
	}
	r := m.Spec.Seeds
	seeds := []uint64{r.Start, r.End - 1, r.Start + r.Len()/3, r.Start + r.Len()/2 + 17, r.Start + 4*r.Len()/5 + 3}
	var walls []float64
	var cpu float64
	b.ResetTimer()
	for b.Loop() {
		for _, seed := range seeds {
			cmd := exec.Command(bin, "show", dir, "--seed", strconv.FormatUint(seed, 10), "--fork-step", strconv.Itoa(m.Spec.ForkAt[0]))
			start := time.Now()
			if msg, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("show --seed %d: %v: %s", seed, err, msg)
			}
			walls = append(walls, time.Since(start).Seconds())
			if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
				cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
			}
		}
	}
	slices.Sort(walls)
	b.ReportMetric(walls[len(walls)-1], "slowest_show_s")
	b.ReportMetric(walls[len(walls)/2], "median_show_s")
	b.ReportMetric(cpu/float64(len(walls)), "cpu_s/show")
	b.ReportMetric(1.0/walls[len(walls)-1], "x_target_1s")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkSweepPeakMemory runs `forklab sweep` over BENCH_MEM_SEEDS seeds
// (default 10,000,000) in a child process and reports its peak resident
// memory (target: under 1 GiB) and its pairs per second.
func BenchmarkSweepPeakMemory(b *testing.B) {
	n := benchSeeds(b, "BENCH_MEM_SEEDS", 10_000_000)
	bin := filepath.Join(b.TempDir(), "forklab")
	if out, err := exec.Command("go", "build", "-o", bin, "../../../cmd/forklab").CombinedOutput(); err != nil {
		b.Fatalf("build: %v: %s", err, out)
	}
	var peak int64
	b.ResetTimer()
	for b.Loop() {
		out := b.TempDir()
		cmd := exec.Command(bin, "sweep", "--seeds", fmt.Sprintf("0:%d", n), "--out", out, "-q")
		if msg, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("sweep: %v: %s", err, msg)
		}
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			peak = max(peak, ru.Maxrss*1024) // Linux reports KiB
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
	b.ReportMetric(float64(peak)/(1<<20), "peak_MiB")
	b.ReportMetric(0, "ns/op")
}

// Analysis at scale (issue 10): the whole report of a 10,000,000-seed
// counter sweep (fork step 3, arms off and on), read by the hand-written
// per-feature SQL before the queries became generic, took 12.8 s on this
// machine (the slices 1.34 s, the policy search 2.9 s at 630 MB, the Qini
// curve 8.5 s at 1.2 GB, the summary 0.27 s). Target: at most 3 s and
// 512 MiB.
const (
	baselineReportSeconds = 12.8
	baselineReportMiB     = 1.2 * 1000 * 1000 * 1000 / (1 << 20)
)

// sweepAtScale builds forklab and returns it with the finished sweep
// FORKLAB_BENCH_REPORT_DIR or, without it, a new sweep of the seed's
// experiment (fork step 3, arms off and on) over the seeds the variable env
// gives (default 10,000,000).
func sweepAtScale(b *testing.B, env string) (bin, dir string) {
	bin = filepath.Join(b.TempDir(), "forklab")
	if out, err := exec.Command("go", "build", "-o", bin, "../../../cmd/forklab").CombinedOutput(); err != nil {
		b.Fatalf("build: %v: %s", err, out)
	}
	dir = os.Getenv("FORKLAB_BENCH_REPORT_DIR")
	if dir == "" {
		n := benchSeeds(b, env, 10_000_000)
		dir = filepath.Join(b.TempDir(), "sweep")
		if msg, err := exec.Command(bin, "sweep", "--seeds", fmt.Sprintf("0:%d", n), "--fork-at", "3", "--out", dir, "-q").CombinedOutput(); err != nil {
			b.Fatalf("sweep: %v: %s", err, msg)
		}
	}
	return bin, dir
}

// BenchmarkReportAtScale sweeps BENCH_REPORT_SEEDS seeds (default
// 10,000,000; FORKLAB_BENCH_REPORT_DIR names a finished sweep to read
// instead) and runs `forklab report` over it in a child process each
// iteration. It reports the best wall time of the report, its CPU seconds
// per run (user and system: the figure to compare on a busy machine), its
// peak resident memory, and the ratios to the per-feature SQL's 12.8 s and
// 1.2 GB.
func BenchmarkReportAtScale(b *testing.B) {
	bin, dir := sweepAtScale(b, "BENCH_REPORT_SEEDS")
	best, cpu, peak := math.Inf(1), 0.0, int64(0)
	b.ResetTimer()
	for b.Loop() {
		cmd := exec.Command(bin, "report", dir)
		start := time.Now()
		if msg, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("report: %v: %s", err, msg)
		}
		best = math.Min(best, time.Since(start).Seconds())
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
			peak = max(peak, ru.Maxrss*1024) // Linux reports KiB
		}
	}
	b.ReportMetric(best, "report_s")
	b.ReportMetric(cpu/float64(b.N), "cpu_s/op")
	b.ReportMetric(float64(peak)/(1<<20), "peak_MiB")
	b.ReportMetric(baselineReportSeconds/best, "x_per_feature_sql")
	b.ReportMetric(baselineReportMiB/(float64(peak)/(1<<20)), "x_less_memory")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkRecordedPeakMemory is issue 23's scale check of recorded
// populations: BENCH_RECORDED_RUNS (default 10,000,000) recorded
// checkpoints — the counter's seeds 0..N-1 at fork step 3, as forklab
// checkpoint prints them, one record {"run_id":"rS","checkpoint":…} per
// line — swept with `forklab sweep --runs FILE` in a child process, and the
// seed sweep of the same N seeds (`forklab sweep --seeds 0:N`) beside it.
// It reports each one's pairs per second and peak resident memory, the
// ratios recorded/seeds, and the file's size: a file of 10 million
// recorded checkpoints streams through in bounded memory.
func BenchmarkRecordedPeakMemory(b *testing.B) {
	n := benchSeeds(b, "BENCH_RECORDED_RUNS", 10_000_000)
	dir := b.TempDir()
	bin := filepath.Join(dir, "forklab")
	if out, err := exec.Command("go", "build", "-o", bin, "../../../cmd/forklab").CombinedOutput(); err != nil {
		b.Fatalf("build: %v: %s", err, out)
	}
	file := filepath.Join(dir, "runs.jsonl")
	size, err := writeRecords(file, n)
	if err != nil {
		b.Fatal(err)
	}
	sweepOnce := func(args ...string) (pairsPerSecond float64, peakMiB float64) {
		out := filepath.Join(dir, "out")
		os.RemoveAll(out)
		start := time.Now()
		cmd := exec.Command(bin, append([]string{"sweep", "--out", out, "-q"}, args...)...)
		if msg, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("sweep %v: %v: %s", args, err, msg)
		}
		rate := float64(n) / time.Since(start).Seconds()
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			peakMiB = float64(ru.Maxrss) / 1024 // Linux reports KiB
		}
		os.RemoveAll(out)
		return rate, peakMiB
	}
	var rec, seeds, recPeak, seedPeak float64
	b.ResetTimer()
	for b.Loop() {
		r, p := sweepOnce("--runs", file)
		rec, recPeak = max(rec, r), max(recPeak, p)
		r, p = sweepOnce("--seeds", fmt.Sprintf("0:%d", n), "--fork-at", "3")
		seeds, seedPeak = max(seeds, r), max(seedPeak, p)
	}
	b.ReportMetric(rec, "pairs/s")
	b.ReportMetric(recPeak, "peak_MiB")
	b.ReportMetric(seeds, "seed_pairs/s")
	b.ReportMetric(seedPeak, "seed_peak_MiB")
	b.ReportMetric(rec/seeds, "x_seed_rate")
	b.ReportMetric(recPeak/seedPeak, "x_seed_memory")
	b.ReportMetric(float64(size)/1e6, "file_MB")
	b.ReportMetric(0, "ns/op")
}

// writeRecords writes the counter's checkpoints of seeds 0..n-1 at fork
// step 3 to path as records, one per line, and returns the file's size.
func writeRecords(path string, n uint64) (int64, error) {
	def, err := lab.Lookup("counter")
	if err != nil {
		return 0, err
	}
	spec := sweep.DefaultSpec()
	r, err := spec.Resolve()
	if err != nil {
		return 0, err
	}
	inst, err := def.Open(r.Configs[0].Params, r.Configs[0].Model)
	if err != nil {
		return 0, err
	}
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	var line []byte
	for seed := range n {
		cp, err := inst.Checkpoint(seed, 3)
		if err != nil {
			return 0, err
		}
		line = append(line[:0], `{"run_id":"r`...)
		line = strconv.AppendUint(line, seed, 10)
		line = append(line, `","checkpoint":`...)
		line = append(line, cp.Checkpoint...)
		line = append(line, "}\n"...)
		if _, err := w.Write(line); err != nil {
			return 0, err
		}
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
