package sweep

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/worlds/counter"
	"github.com/forklab/forklab/pipeline/worlds/pyrand"
	"github.com/forklab/forklab/schemas"
)

// Options control how a sweep runs, not what it computes: the same Spec
// gives the same rows under any Options.
type Options struct {
	// Out is the results directory; Prepare it first.
	Out string
	// Workers is the number of shards processed at once; 0 means one per
	// CPU.
	Workers int
	// Progress, if not nil, is called from worker goroutines with the
	// number of seeds just finished; it must be safe for concurrent use.
	Progress func(seeds int)
	// Version is the forklab version recorded in the manifest.
	Version string
	// Runs, if set, supplies the runs instead of the in-memory lab: the
	// sweep then only labels and writes what Runs returns (forklab sweep
	// --from-log plays the sessions on the session log). The tables must
	// come out identical to the in-memory sweep's.
	Runs Runs
}

// Runs supplies a sweep's runs from elsewhere than the in-memory lab.
// Methods are called from worker goroutines and must be safe for concurrent
// use.
type Runs interface {
	// Prefix returns the state of config's run of seed at fork step
	// forkStep and the turns taken to get there.
	Prefix(config, seed uint64, forkStep int) (counter.State, []fork.Turn, error)
	// Branch returns the finished branch of arm and replica forked at
	// forkStep: its final state, success, and whether the arm's
	// intervention was applied.
	Branch(config, seed uint64, forkStep int, arm fork.Arm, replica int) (final counter.State, success, intervened bool, err error)
}

// rowsPerShard bounds the branch rows a shard produces, which bounds the
// rows in a table file.
const rowsPerShard = 1 << 18

// ShardSeeds returns the number of seeds per shard for a spec: as many as
// keep a shard's branch rows near rowsPerShard, a multiple of 64, at least
// 1024. It depends only on the spec.
func (s Spec) ShardSeeds() uint64 {
	perSeed := uint64(len(s.ForkAt) * len(s.Arms) * s.Replicas)
	n := max(uint64(1024), rowsPerShard/perSeed)
	return n - n%64
}

type shard struct {
	config Config
	index  int
	seeds  Range
}

// Run runs the sweep into opt.Out, which Prepare must have readied, and
// writes the manifest last. On error or cancellation it removes the table
// files it wrote and leaves no manifest.
func Run(ctx context.Context, spec Spec, opt Options) (Manifest, error) {
	if err := spec.Validate(); err != nil {
		return Manifest{}, err
	}
	m := Manifest{ForklabVersion: opt.Version, SchemaVersion: schemas.SchemaVersion, Spec: spec,
		Configs: spec.Configs(), Rows: map[string]int64{}, Files: map[string]int{}, StartedAt: time.Now().UTC()}
	var shards []shard
	size := spec.ShardSeeds()
	for _, c := range m.Configs {
		for i, lo := 0, spec.Seeds.Start; lo < spec.Seeds.End; i, lo = i+1, lo+size {
			shards = append(shards, shard{config: c, index: i, seeds: Range{lo, min(lo+size, spec.Seeds.End)}})
		}
	}
	syncs := newSyncer()
	if err := writeConfigs(opt.Out, m.Configs, syncs); err != nil {
		syncs.wait()
		removeTables(opt.Out)
		return m, err
	}
	workers := opt.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(shards))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan shard)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		rows     [4]atomic.Int64
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := newShardWriter(spec, opt, syncs)
			for sh := range work {
				n, err := w.run(ctx, sh)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
					continue
				}
				for i := range n {
					rows[i].Add(n[i])
				}
			}
		}()
	}
feed:
	for _, sh := range shards {
		select {
		case work <- sh:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if err := syncs.wait(); firstErr == nil {
		firstErr = err
	}
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		removeTables(opt.Out)
		return m, firstErr
	}
	m.Rows[schemas.ConfigsTable] = int64(len(m.Configs))
	for i, t := range schemas.Tables {
		m.Rows[t] = rows[i].Load()
	}
	var dirs []string
	for _, t := range append([]string{schemas.ConfigsTable}, schemas.Tables...) {
		n, d, err := tableTree(filepath.Join(opt.Out, t))
		if err != nil {
			return m, fmt.Errorf("sync %s: %w", t, err)
		}
		m.Files[t] = n
		dirs = append(dirs, d...)
	}
	if err := syncDirs(dirs); err != nil {
		return m, fmt.Errorf("sync table folders: %w", err)
	}
	m.FinishedAt = time.Now().UTC()
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return m, err
	}
	if err := writeFileAtomic(filepath.Join(opt.Out, ManifestName), append(b, '\n')); err != nil {
		return m, fmt.Errorf("write manifest: %w", err)
	}
	return m, syncDir(opt.Out)
}

// removeTables empties the table folders of an aborted sweep.
func removeTables(dir string) {
	for _, t := range append([]string{schemas.ConfigsTable}, schemas.Tables...) {
		os.RemoveAll(filepath.Join(dir, t))
	}
}

// tableTree lists the directories under root, root included, and counts
// the Parquet files.
func tableTree(root string) (files int, dirs []string, err error) {
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, path)
			return nil
		}
		if filepath.Ext(path) == ".parquet" {
			files++
		}
		return nil
	})
	return files, dirs, err
}

// writeConfigs writes the configs table and hands it to s.
func writeConfigs(out string, configs []Config, s *syncer) error {
	rows := make([]schemas.Config, len(configs))
	for i, c := range configs {
		rows[i] = schemas.Config{ConfigID: int32(c.ID), World: counter.Name,
			Target: int32(c.Params.Target), BaseBudget: int32(c.Params.BaseBudget),
			SlackValues: toInt32s(c.Params.Slack), FreezeValues: toInt32s(c.Params.FreezeAt),
			PStall: c.Params.PStall, PObsNoise: c.Params.PObsNoise, PRefreshFail: c.Params.PRefreshFail,
			Temperature: c.Model.Temperature, NoTool: c.Model.NoTool}
	}
	var t table[schemas.Config]
	if err := t.open(filepath.Join(out, schemas.ConfigsTable), "configs.parquet"); err != nil {
		return fmt.Errorf("write configs: %w", err)
	}
	for _, r := range rows {
		if _, err := t.add(r); err != nil {
			t.abort()
			return fmt.Errorf("write configs: %w", err)
		}
	}
	if err := t.commit(s); err != nil {
		t.abort()
		return fmt.Errorf("write configs: %w", err)
	}
	return nil
}

func toInt32s(xs []int) []int32 {
	out := make([]int32, len(xs))
	for i, x := range xs {
		out[i] = int32(x)
	}
	return out
}

// forkTables are the files of one fork step of a shard.
type forkTables struct {
	checkpoints table[schemas.Checkpoint]
	branches    table[schemas.Branch]
	pairs       table[schemas.Pair]
	// arena holds the JSON of the checkpoint rows not yet handed to the
	// Parquet writer, which copies it: it is emptied whenever the
	// checkpoints table flushes. See checkpointJSON.
	arena []byte
}

// checkpointBatch is how many checkpoint rows go to the Parquet writer at
// once: few enough that their JSON (about 500 bytes each) is still in the
// CPU's cache when the writer copies it.
const checkpointBatch = 512

// shardWriter runs shards one after another on one goroutine, reusing its
// buffers.
type shardWriter struct {
	spec       Spec
	opt        Options
	sync       *syncer
	tasks      table[schemas.Task]
	forks      []forkTables // one per spec.ForkAt, in order
	hist       []fork.Turn
	freezes    []int32       // the tasks' freeze_at values; see seed
	batch      *pyrand.Batch // seeds BatchLanes task generators at once
	arms       []fork.Arm    // the control off first, then the spec's order
	unreported int           // seeds finished since the last Progress call
}

func newShardWriter(spec Spec, opt Options, s *syncer) *shardWriter {
	arms := []fork.Arm{fork.Off}
	for _, a := range spec.Arms {
		if a != fork.Off {
			arms = append(arms, a)
		}
	}
	w := &shardWriter{spec: spec, opt: opt, sync: s, arms: arms, forks: make([]forkTables, len(spec.ForkAt))}
	for i := range w.forks {
		w.forks[i].checkpoints.batch = checkpointBatch
	}
	return w
}

// progress reports finished seeds in batches of at least 4096, or all
// outstanding ones when flush is set.
func (w *shardWriter) progress(seeds int, flush bool) {
	if w.opt.Progress == nil {
		return
	}
	w.unreported += seeds
	if w.unreported >= 4096 || flush && w.unreported > 0 {
		w.opt.Progress(w.unreported)
		w.unreported = 0
	}
}

// tableFile is a table of any row type, as far as committing goes.
type tableFile interface {
	commit(*syncer) error
	abort()
}

// each calls f for every table file of the shard.
func (w *shardWriter) each(f func(tableFile) error) error {
	if err := f(&w.tasks); err != nil {
		return err
	}
	for i := range w.forks {
		ft := &w.forks[i]
		for _, t := range []tableFile{&ft.checkpoints, &ft.branches, &ft.pairs} {
			if err := f(t); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *shardWriter) run(ctx context.Context, sh shard) (rows [4]int64, err error) {
	name := fmt.Sprintf("part-%06d.parquet", sh.index)
	cdir := fmt.Sprintf("config_id=%d", sh.config.ID)
	defer func() {
		if err != nil {
			w.each(func(t tableFile) error { t.abort(); return nil })
		}
	}()
	if err = w.tasks.open(filepath.Join(w.opt.Out, "tasks", cdir), name); err != nil {
		return rows, fmt.Errorf("shard %s/%s: %w", cdir, name, err)
	}
	w.freezes = w.freezes[:0]
	for i, f := range w.spec.ForkAt {
		fdir := fmt.Sprintf("fork_step=%d", f)
		ft := &w.forks[i]
		ft.arena = ft.arena[:0]
		for _, o := range []struct {
			table string
			open  func(dir, name string) error
		}{{"checkpoints", ft.checkpoints.open}, {"branches", ft.branches.open}, {"pairs", ft.pairs.open}} {
			if err = o.open(filepath.Join(w.opt.Out, o.table, cdir, fdir), name); err != nil {
				return rows, fmt.Errorf("shard %s/%s: %w", cdir, name, err)
			}
		}
	}
	if err = w.simulate(ctx, sh); err != nil {
		return rows, fmt.Errorf("shard %s/%s: %w", cdir, name, err)
	}
	if err = w.each(func(t tableFile) error { return t.commit(w.sync) }); err != nil {
		return rows, fmt.Errorf("shard %s/%s: %w", cdir, name, err)
	}
	rows[0] = w.tasks.n
	for i := range w.forks {
		rows[1] += w.forks[i].checkpoints.n
		rows[2] += w.forks[i].branches.n
		rows[3] += w.forks[i].pairs.n
	}
	return rows, nil
}

// simulate produces the shard's rows: for each seed, the task, then per fork
// step the checkpoint, every arm's replicas and the pairs.
func (w *shardWriter) simulate(ctx context.Context, sh shard) error {
	// The counter world's own Lab, not the generic fork.Lab: see
	// counter.Lab for why, and for the test that holds the two equal.
	lab := &counter.Lab{World: counter.World{P: sh.config.Params}, Model: sh.config.Model}
	enc, err := fork.NewEncoder[counter.State](counter.Name, sh.config.Params, sh.config.Model)
	if err != nil {
		return err
	}
	enc.StateJSON(counter.State.AppendJSON)
	if w.batch == nil {
		w.batch = new(pyrand.Batch)
	}
	for lo := sh.seeds.Start; lo < sh.seeds.End; lo += pyrand.BatchLanes {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(uint64(pyrand.BatchLanes), sh.seeds.End-lo)
		if n == pyrand.BatchLanes {
			w.batch.SeedRange(lo)
		} else {
			seeds := make([]uint64, n)
			for l := range seeds {
				seeds[l] = lo + uint64(l)
			}
			w.batch.Seed(seeds)
		}
		for l := range n {
			if err := w.seed(lab, enc, lo+l, lab.World.StartWith(lo+l, w.batch.Lane(int(l))), sh.config); err != nil {
				return err
			}
		}
		w.progress(int(n), false)
	}
	w.progress(0, true)
	return nil
}

// checkpointJSON encodes a checkpoint into ft's arena and returns it as a
// string sharing the arena's bytes. The string is valid until the
// checkpoints table next flushes: the Parquet writer copies it then, and
// the arena is reused (a grown arena leaves the old bytes to the strings
// that still point into them).
func (ft *forkTables) checkpointJSON(enc *fork.Encoder[counter.State, counter.Params], forkStep int, hist []fork.Turn, s counter.State) (string, error) {
	start := len(ft.arena)
	var err error
	ft.arena, err = enc.Append(ft.arena, forkStep, hist, s)
	if err != nil || len(ft.arena) == start {
		return "", err
	}
	return unsafe.String(&ft.arena[start], len(ft.arena)-start), nil
}

// seed writes one seed's rows: its task, then per fork step its checkpoint,
// branches and pairs. States and branches come from lab, or from
// w.opt.Runs when it is set.
func (w *shardWriter) seed(lab *counter.Lab, enc *fork.Encoder[counter.State, counter.Params], seed uint64, s counter.State, c Config) error {
	cw := &lab.World
	task := schemas.Task{Seed: int64(seed), Slack: s.Budget - int32(c.Params.BaseBudget), Budget: s.Budget}
	if s.FreezeAt != 0 {
		// The row points into w.freezes, which is emptied for reuse
		// only when the rows went to the writer, which copies the
		// values. (Growing it leaves the old values to the pointers.)
		w.freezes = append(w.freezes, s.FreezeAt)
		task.FreezeAt = &w.freezes[len(w.freezes)-1]
	}
	if flushed, err := w.tasks.add(task); err != nil {
		return err
	} else if flushed {
		w.freezes = w.freezes[:0]
	}
	w.hist = w.hist[:0]
	prefix := fork.PrefixKey(seed)
	K := w.spec.Replicas
	var final counter.State
	for i, f := range w.spec.ForkAt {
		ft := &w.forks[i]
		if w.opt.Runs != nil {
			var hist []fork.Turn
			var err error
			if s, hist, err = w.opt.Runs.Prefix(uint64(c.ID), seed, f); err != nil {
				return err
			}
			w.hist = append(w.hist[:0], hist...)
		} else {
			lab.Advance(&s, prefix, f, &w.hist)
		}
		o := cw.Observe(s)
		feat, truth := cw.Features(s), cw.Truth(s)
		fc := schemas.Features{SameObs: feat.SameObs, RepeatRun: int32(feat.RepeatRun), ObsValue: int32(feat.ObsValue),
			StepsUsed: int32(feat.StepsUsed), BudgetLeft: int32(feat.BudgetLeft)}
		hidden := schemas.Hidden{HiddenStuck: truth.Stuck, HiddenFault: truth.Fault}
		cp, err := ft.checkpointJSON(enc, f, w.hist, s)
		if err != nil {
			return err
		}
		flushed, err := ft.checkpoints.add(schemas.Checkpoint{Seed: int64(seed), Over: o.Over, Features: fc, Hidden: hidden,
			HiddenValue: int32(truth.Value), Checkpoint: cp})
		if err != nil {
			return err
		}
		if flushed {
			ft.arena = ft.arena[:0]
		}
		fires := w.spec.Policy != nil && w.spec.Policy.Fires(feat)
		var offWins int
		for _, arm := range w.arms {
			wins := 0
			for r := range K {
				var ok, iv bool
				if w.opt.Runs != nil {
					var err error
					if final, ok, iv, err = w.opt.Runs.Branch(uint64(c.ID), seed, f, arm, r); err != nil {
						return err
					}
				} else {
					ok, iv = lab.Branch(&final, &s, seed, f, arm, r, fires)
				}
				if ok {
					wins++
				}
				if _, err := ft.branches.add(schemas.Branch{Seed: int64(seed), Arm: string(arm), Replica: int32(r),
					Intervened: iv, Success: ok, Declared: final.Declared, FinalValue: final.V, Steps: final.Steps}); err != nil {
					return err
				}
			}
			if arm == fork.Off {
				offWins = wins
				continue
			}
			control, treatment := fork.Majority(offWins, K), fork.Majority(wins, K)
			label, quad := fork.Classify(control, treatment)
			if _, err := ft.pairs.add(schemas.Pair{Seed: int64(seed), Arm: string(arm), Replicas: int32(K),
				ControlWins: int32(offWins), TreatmentWins: int32(wins), ControlSuccess: control,
				TreatmentSuccess: treatment, Label: string(label), Quadrant: string(quad),
				Features: fc, Hidden: hidden}); err != nil {
				return err
			}
		}
	}
	return nil
}
