package sweep

import (
	"os"
	"testing"
)

// BenchmarkVerifyContent measures the check every command makes when it
// opens a results directory (issue 25 D): the CRC-32C of every table file
// against the manifest, over the finished sweep in FORKLAB_BENCH_VERIFY_DIR
// (make bench-sql makes one of 1,000,000 seeds). It reports the
// milliseconds of one check and the megabytes per second read.
func BenchmarkVerifyContent(b *testing.B) {
	dir := os.Getenv("FORKLAB_BENCH_VERIFY_DIR")
	if dir == "" {
		b.Skip("FORKLAB_BENCH_VERIFY_DIR names no results directory (make bench-sql sets it)")
	}
	m, err := ReadManifest(dir)
	if err != nil {
		b.Fatal(err)
	}
	var bytes int64
	for _, f := range m.Files {
		bytes += f.Bytes
	}
	b.SetBytes(bytes)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := VerifyContent(dir, m); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/check")
	b.ReportMetric(float64(bytes)/1e6, "MB")
}
