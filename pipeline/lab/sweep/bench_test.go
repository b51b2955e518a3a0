package sweep

import (
	"context"
	"testing"
)

func BenchmarkShard(b *testing.B) {
	spec := DefaultSpec()
	spec.Seeds = Range{0, 1 << 17}
	for b.Loop() {
		out := b.TempDir()
		if err := Prepare(out, false); err != nil {
			b.Fatal(err)
		}
		if _, err := Run(context.Background(), spec, Options{Out: out, Workers: 1}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(spec.Seeds.Len())*float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
}
