package sweep

import (
	"bytes"
	"context"
	"math"
	"syscall"
	"testing"
	"unsafe"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/worlds/counter"
	"github.com/forklab/forklab/pipeline/worlds/pyrand"
	"github.com/forklab/forklab/schemas"
	"github.com/parquet-go/parquet-go"
)

// stageSeeds is the number of seeds each stage benchmark runs: one shard of
// the seed's spec.
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
// busy machine inflate less.
func stage(b *testing.B, name string, body func(b *testing.B)) {
	b.Run(name, func(b *testing.B) {
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

// BenchmarkStages splits the per-seed cost of the seed's sweep (fork step
// 3, arms off and on) into its stages:
//
//	seeding          the task generators (pyrand.Batch) and the tasks
//	lab=fork         the runs through the generic fork.Lab (the reference;
//	                 the sweep used it until counter.Lab)
//	lab=counter      the same runs through counter.Lab, as the sweep runs them
//	checkpoint-json  encoding the checkpoint JSON with the sweep's Encoder
//	parquet=TABLE    writing one table's rows to Parquet (in memory), with
//	                 the sweep's writer options and batches; for checkpoints
//	                 the JSON is encoded batch by batch as the sweep does,
//	                 and its cost (checkpoint-json) is included
//	parquet-defaults=TABLE  the same with parquet-go's default encodings
//	                 and page statistics, the options the sweep used before
//	shard            the whole sweep of the seeds, one worker, into files
//
// Run with -bench Stages -benchtime 5x and take the best of a few -count
// runs; on a busy machine compare cpu-ns/seed.
func BenchmarkStages(b *testing.B) {
	spec := DefaultSpec()
	spec.Seeds = Range{0, stageSeeds}
	c := spec.Configs()[0]
	w := counter.World{P: c.Params}
	starts := make([]counter.State, stageSeeds)
	batch := new(pyrand.Batch)
	stage(b, "seeding", func(*testing.B) {
		for lo := uint64(0); lo < stageSeeds; lo += pyrand.BatchLanes {
			batch.SeedRange(lo)
			for l := range uint64(pyrand.BatchLanes) {
				starts[lo+l] = w.StartWith(lo+l, batch.Lane(int(l)))
			}
		}
	})
	var hist []fork.Turn
	generic := fork.Lab[counter.State]{World: w, Model: c.Model}
	stage(b, "lab=fork", func(*testing.B) {
		for seed, s := range starts {
			hist = hist[:0]
			s = generic.Advance(s, fork.PrefixKey(uint64(seed)), 3, &hist)
			generic.Branch(s, uint64(seed), 3, fork.Off, 0, false)
			generic.Branch(s, uint64(seed), 3, fork.On, 0, false)
		}
	})
	lab := &counter.Lab{World: w, Model: c.Model}
	var final counter.State
	stage(b, "lab=counter", func(*testing.B) {
		for seed, s := range starts {
			hist = hist[:0]
			lab.Advance(&s, fork.PrefixKey(uint64(seed)), 3, &hist)
			lab.Branch(&final, &s, uint64(seed), 3, fork.Off, 0, false)
			lab.Branch(&final, &s, uint64(seed), 3, fork.On, 0, false)
		}
	})
	enc, err := fork.NewEncoder[counter.State](counter.Name, c.Params, c.Model)
	if err != nil {
		b.Fatal(err)
	}
	enc.StateJSON(counter.State.AppendJSON)
	hists := make([][]fork.Turn, stageSeeds)
	states := make([]counter.State, stageSeeds)
	for seed, s := range starts {
		lab.Advance(&s, fork.PrefixKey(uint64(seed)), 3, &hists[seed])
		states[seed] = s
	}
	buf := make([]byte, 0, checkpointBatch*1024)
	stage(b, "checkpoint-json", func(*testing.B) {
		for seed, s := range states {
			if seed%checkpointBatch == 0 {
				buf = buf[:0]
			}
			buf, _ = enc.Append(buf, 3, hists[seed], s)
		}
	})

	// The rows of every table, produced by the sweep's own code into
	// tables that never flush.
	sw := newShardWriter(spec, Options{}, nil)
	sw.tasks.batch = math.MaxInt
	for i := range sw.forks {
		sw.forks[i].checkpoints.batch = math.MaxInt
		sw.forks[i].branches.batch = math.MaxInt
		sw.forks[i].pairs.batch = math.MaxInt
	}
	if err := sw.simulate(context.Background(), shard{config: c, seeds: spec.Seeds}); err != nil {
		b.Fatal(err)
	}
	ft := &sw.forks[0]
	benchTable(b, "tasks", sw.tasks.buf, batchRows)
	// The checkpoint rows get their JSON batch by batch, into a reused
	// arena, as in the sweep: the writer copies it while it is in cache.
	cps := ft.checkpoints.buf
	arena := make([]byte, 0, checkpointBatch*1024)
	batchJSON := func(i, j int) {
		arena = arena[:0]
		for k := i; k < j; k++ {
			start := len(arena)
			arena, _ = enc.Append(arena, 3, hists[k], states[k])
			cps[k].Checkpoint = unsafe.String(&arena[start], len(arena)-start)
		}
	}
	benchTableOpts(b, "parquet=checkpoints", cps, checkpointBatch, batchJSON, writerOptions[schemas.Checkpoint]())
	benchTableOpts(b, "parquet-defaults=checkpoints", cps, checkpointBatch, batchJSON, defaultOptions)
	benchTable(b, "branches", ft.branches.buf, batchRows)
	benchTable(b, "pairs", ft.pairs.buf, batchRows)

	stage(b, "shard", func(b *testing.B) {
		out := b.TempDir()
		if err := Prepare(out, false); err != nil {
			b.Fatal(err)
		}
		if _, err := Run(context.Background(), spec, Options{Out: out, Workers: 1}); err != nil {
			b.Fatal(err)
		}
	})
}

// defaultOptions are the writer options the sweep used before
// writerOptions: parquet-go's default encodings and statistics.
var defaultOptions = []parquet.WriterOption{parquet.Compression(&zstdFastest),
	parquet.MaxRowsPerRowGroup(1 << 17), parquet.CreatedBy("forklab", "", "")}

// benchTable times writing rows to an in-memory Parquet file in batches of
// batch rows, with the sweep's writer options and with parquet-go's
// defaults.
func benchTable[T any](b *testing.B, name string, rows []T, batch int) {
	benchTableOpts(b, "parquet="+name, rows, batch, nil, writerOptions[T]())
	benchTableOpts(b, "parquet-defaults="+name, rows, batch, nil, defaultOptions)
}

// benchTableOpts times writing rows with writer options opts, calling
// prepare(i, j), if not nil, before writing rows[i:j].
func benchTableOpts[T any](b *testing.B, name string, rows []T, batch int, prepare func(i, j int), opts []parquet.WriterOption) {
	var sink bytes.Buffer
	stage(b, name, func(b *testing.B) {
		sink.Reset()
		pw := parquet.NewGenericWriter[T](&sink, opts...)
		for i := 0; i < len(rows); i += batch {
			j := min(i+batch, len(rows))
			if prepare != nil {
				prepare(i, j)
			}
			if _, err := pw.Write(rows[i:j]); err != nil {
				b.Fatal(err)
			}
		}
		if err := pw.Close(); err != nil {
			b.Fatal(err)
		}
	})
}
