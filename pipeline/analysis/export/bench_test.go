package export

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// peakRSS reads the process's peak resident set size (VmHWM), in bytes,
// after resetting it when reset is set (Linux: /proc/self/clear_refs 5).
func peakRSS(reset bool) (int64, bool) {
	if reset {
		if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
			return 0, false
		}
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// BenchmarkQueryPeakMemory writes a result of FORKLAB_BENCH_ROWS rows
// (default 10,000,000: about 300 MB as CSV) in each format, each in a
// process of its own, and reports that process's peak resident memory and
// its ratio to the baseline, DuckDB's COPY to CSV. Every format streams,
// so all stay within a small multiple of the baseline; reading the result
// whole through duckdb-go instead takes memory in proportion to it.
//
//	go test -run '^$' -bench QueryPeakMemory -benchtime 1x ./pipeline/analysis/export
func BenchmarkQueryPeakMemory(b *testing.B) {
	if _, ok := peakRSS(true); !ok {
		b.Skip("no /proc/self/clear_refs: peak memory is measured on Linux only")
	}
	formats := []Format{CSV, NDJSON, Parquet, Table}
	if ArrowAvailable {
		formats = append(formats, Arrow)
	}
	var baseline float64
	for _, f := range formats {
		b.Run(string(f), func(b *testing.B) {
			var peak float64
			for i := 0; i < b.N; i++ {
				cmd := exec.Command(os.Args[0], "-test.run=^TestPeakMemoryChild$", "-test.count=1", "-test.v")
				cmd.Env = append(os.Environ(), "FORKLAB_PEAK_FORMAT="+string(f))
				out, err := cmd.CombinedOutput()
				if err != nil {
					b.Fatalf("%v\n%s", err, out)
				}
				m := regexp.MustCompile(`PEAK (\d+)`).FindSubmatch(out)
				if m == nil {
					b.Fatalf("no peak reported:\n%s", out)
				}
				n, _ := strconv.ParseFloat(string(m[1]), 64)
				peak = max(peak, n/(1<<20))
			}
			if f == CSV {
				baseline = peak
			}
			b.ReportMetric(peak, "peak-MB")
			if baseline > 0 {
				b.ReportMetric(peak/baseline, "x-csv-peak")
			}
		})
	}
}

// TestPeakMemoryChild is BenchmarkQueryPeakMemory's measuring process: it
// writes the benchmark's result in $FORKLAB_PEAK_FORMAT and prints its
// peak resident memory, after the sweep it queries is made.
func TestPeakMemoryChild(t *testing.T) {
	f := Format(os.Getenv("FORKLAB_PEAK_FORMAT"))
	if f == "" {
		t.Skip("run by BenchmarkQueryPeakMemory")
	}
	rows := 10_000_000
	if s := os.Getenv("FORKLAB_BENCH_ROWS"); s != "" {
		rows, _ = strconv.Atoi(s)
	}
	db := seedResults(t)
	peakRSS(true)
	q := fmt.Sprintf("SELECT range AS i, range * 2 AS j, 'seed-' || range AS s FROM range(%d)", rows)
	o := Options{Format: f, Out: filepath.Join(t.TempDir(), "result."+string(f)), Stdout: io.Discard}
	if err := Run(context.Background(), db.Dir, q, o); err != nil {
		t.Fatal(err)
	}
	p, _ := peakRSS(false)
	fmt.Printf("PEAK %d\n", p)
}
