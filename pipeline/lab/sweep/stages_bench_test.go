package sweep

import (
	"bytes"
	"context"
	"io"
	"syscall"
	"testing"

	"github.com/forklab/forklab/pipeline/lab"
)

// stageSeeds is the number of seeds each stage benchmark runs: one unit of
// the seed's spec (fork step 3, arms off and on).
const stageSeeds = 1 << 17

// cpuNanos returns the CPU time, user and system, the process has used.
func cpuNanos() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// stage runs body as sub-benchmark name and reports, per seed of
// stageSeeds, its wall time (ns/seed) and the process's CPU time
// (cpu-ns/seed, garbage collection included), which other processes on a
// busy machine inflate less. prepare, if not nil, runs first, untimed.
func stage(b *testing.B, name string, prepare, body func(b *testing.B)) {
	b.Run(name, func(b *testing.B) {
		if prepare != nil {
			prepare(b)
		}
		var cpu int64
		for b.Loop() {
			c := cpuNanos()
			body(b)
			cpu += cpuNanos() - c
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/stageSeeds, "ns/seed")
		b.ReportMetric(float64(cpu)/float64(b.N)/stageSeeds, "cpu-ns/seed")
		b.ReportMetric(0, "ns/op")
	})
}

// discardRows is a table file's row writer that fills its slot rows as the
// real one does and writes nothing: the cost of making the rows alone.
type discardRows struct{ rowWriter }

func (discardRows) writeN(int) error { return nil }

// BenchmarkStages splits the per-seed cost of one unit of the seed's sweep
// (stageSeeds seeds, fork step 3, arms off and on, the counter world) into
// its stages:
//
//	simulate        the counter runner alone: seeding, runs to the fork,
//	                branches, features, checkpoint JSON
//	rows            the runner and the sweep's rows (unitWriter.seed) in
//	                streamed files whose batches go nowhere
//	parquet=TABLE   one table's rows written to Parquet in memory with the
//	                sweep's layout, options and batches
//	unit            the whole unit, one worker, into files: the sum of the
//	                above, and opening, syncing and renaming the files
//
// Run with -bench Stages -benchtime 5x and take the best of a few -count
// runs; on a busy machine compare cpu-ns/seed (make bench-stages).
func BenchmarkStages(b *testing.B) {
	spec := DefaultSpec()
	spec.Seeds = Range{0, stageSeeds}
	r, err := spec.Resolve()
	if err != nil {
		b.Fatal(err)
	}
	ls, err := newLayouts(r.Decl, false)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	u := Unit{Config: 0, Index: 0, Seeds: spec.Seeds}
	newWriter := func(b *testing.B) *unitWriter {
		w := newUnitWriter(r, ls, b.TempDir(), Options{}, newSyncer(), func(ledgerEntry, error) {})
		b.Cleanup(w.close)
		return w
	}

	sim := newWriter(b)
	rn, err := sim.runner(r.Configs[0])
	if err != nil {
		b.Fatal(err)
	}
	stage(b, "simulate", nil, func(b *testing.B) {
		if err := rn.Run(ctx, u.Seeds.Start, u.Seeds.End, func(*lab.SeedResult) error { return nil }); err != nil {
			b.Fatal(err)
		}
	})

	rows := newWriter(b)
	stage(b, "rows", nil, func(b *testing.B) {
		if err := rows.open(u, false); err != nil {
			b.Fatal(err)
		}
		rows.each(func(t *tableFile) error { t.w = discardRows{t.w}; return nil })
		rn, err := rows.runner(r.Configs[0])
		if err != nil {
			b.Fatal(err)
		}
		if err := rn.Run(ctx, u.Seeds.Start, u.Seeds.End, rows.seed); err != nil {
			b.Fatal(err)
		}
		rows.each(func(t *tableFile) error { t.abort(); return nil })
	})

	// Every table's rows, buffered whole (made once, when a parquet stage
	// runs), then written as a buffered file is (commit) but into memory.
	var buf *unitWriter
	outer := b
	buffered := func(b *testing.B) {
		if buf != nil {
			return
		}
		buf = newWriter(outer)
		if err := buf.open(u, true); err != nil {
			b.Fatal(err)
		}
		rn, err := buf.runner(r.Configs[0])
		if err != nil {
			b.Fatal(err)
		}
		if err := rn.Run(ctx, u.Seeds.Start, u.Seeds.End, buf.seed); err != nil {
			b.Fatal(err)
		}
	}
	for _, name := range []string{"tasks", "checkpoints", "branches", "pairs"} {
		var sink bytes.Buffer
		stage(b, "parquet="+name, buffered, func(b *testing.B) {
			t := map[string]*tableFile{"tasks": buf.tasks, "checkpoints": buf.forks[0].checkpoints,
				"branches": buf.forks[0].branches, "pairs": buf.forks[0].pairs}[name]
			sink.Reset()
			if err := writeBuffered(t, &sink); err != nil {
				b.Fatal(err)
			}
		})
	}

	stage(b, "unit", nil, func(b *testing.B) {
		st, err := Stage(b.TempDir()+"/out", false, false)
		if err != nil {
			b.Fatal(err)
		}
		defer st.Release()
		uw, err := NewUnitWriter(r, st, Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer uw.Close()
		if _, err := uw.Write(ctx, u); err != nil {
			b.Fatal(err)
		}
	})
}

// writeBuffered writes a buffered table file's rows to dst as commit would
// write them to its file, and leaves the rows in place.
func writeBuffered(t *tableFile, dst io.Writer) error {
	present := make([]bool, len(t.l.cols))
	nullable := make([]bool, len(t.l.cols))
	for i, c := range t.l.cols {
		allNull := t.cols[i].nulls == t.rows
		present[i] = !(c.omittable && allNull)
		nullable[i] = c.nullable || t.cols[i].nulls > 0
	}
	fl, err := t.l.fileLayout(present, nullable)
	if err != nil {
		return err
	}
	t.fl = fl
	t.w = fl.class.newWriter(dst, fl.opts)
	for lo := 0; lo < t.rows; lo += t.batch {
		if err := t.w.write(t, lo, min(lo+t.batch, t.rows)); err != nil {
			return err
		}
	}
	return t.w.close()
}
