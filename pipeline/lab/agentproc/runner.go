package agentproc

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/world"
)

// maxBatchSeeds bounds the seeds one batch line starts.
const maxBatchSeeds = 64

// Runner returns the runner of plan: it sends the seeds' runs and branches
// to the agent's pool.
func (i *Instance) Runner(plan lab.Plan) (lab.Runner, error) {
	if err := lab.CheckPlan(i.def.init.World, plan); err != nil {
		return nil, err
	}
	key, err := journalKey(i.def.init.World, i.params, i.model, plan)
	if err != nil {
		return nil, err
	}
	return &runner{inst: i, plan: plan, key: key}, nil
}

// runner plays blocks of seeds through the agent's pool: seeds run
// concurrently, as many as the pool has processes (or batches of seeds,
// when the agent takes batches), and are emitted in seed order, so the
// files a sweep writes do not depend on the pool's size or timing.
type runner struct {
	inst *Instance
	plan lab.Plan
	key  string // names the journal files of this configuration and plan
}

// Costly says every seed costs real work: the sweep writes the runner's
// units buffered, once, and never plays them twice.
func (r *runner) Costly() bool { return true }

// block is a run of consecutive seeds played together.
type block struct {
	lo, hi  uint64
	recs    []*lab.Record // a recorded population's runs (RunRecords)
	results []*lab.SeedResult
	done    chan struct{}
	err     error
	skipped bool       // not played: the definition was stopped
	dearest world.Cost // the most one of its seeds cost (replayed ones included)
}

// Run plays seeds [lo, hi) and emits them in order. Seeds in the journal
// are replayed from it; the others are asked of the agent, blocks of them
// at once, each block admitted by the definition's budget (budget.go),
// which may make it smaller. Failed runs and branches become errors in the
// results (error rows), not errors of Run. Run returns ErrStopped when the
// definition was stopped (Stop, or its budget reached) before every seed
// had started; the seeds in progress are finished and journaled first.
// When fail-fast finds the agent failing (Config.FailFast), Run abandons
// the seeds in progress — they would fail too — and returns the
// *FailingError that says why; the seeds finished before are journaled.
func (r *runner) Run(ctx context.Context, lo, hi uint64, emit func(*lab.SeedResult) error) error {
	def := r.inst.def
	def.mu.Lock()
	dir := def.journal
	def.mu.Unlock()
	var j *journal
	if dir != "" {
		var err error
		if j, err = openJournal(dir, r.key, lo, hi); err != nil {
			return err
		}
		defer j.close()
	}
	size := uint64(def.blockSize())
	inner, cancel := def.failFastContext(ctx)
	defer cancel()
	window := make(chan struct{}, 2*def.pool.cfg.Parallel)
	// The blocks in seed order, as the dispatcher cuts them: at most one
	// per window slot, and the skipped block that ends a stopped run.
	blocks := make(chan *block, cap(window)+1)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1) // the dispatcher, so that its Adds come before any Wait returns
	go func() {
		defer wg.Done()
		defer close(blocks)
		for a := lo; a < hi; {
			var n uint64
			select {
			case window <- struct{}{}:
				n = def.admit(inner, min(size, hi-a))
			case <-inner.Done():
			}
			if n == 0 {
				// Stopped, or interrupted: the emitter ends at this block.
				b := &block{lo: a, hi: a, skipped: true, done: make(chan struct{})}
				close(b.done)
				blocks <- b // room: the buffer has a slot beyond the window
				return
			}
			b := &block{lo: a, hi: a + n, done: make(chan struct{})}
			a += n
			wg.Add(1)
			go func(b *block) {
				defer wg.Done()
				defer close(b.done)
				b.err = r.play(inner, b, j)
				def.release(b.hi-b.lo, b.dearest)
			}(b)
			blocks <- b
		}
	}()
	return def.emitBlocks(ctx, blocks, window, cancel, &wg, emit)
}

// failFastContext returns a context of ctx that fail-fast cancels when it
// finds the agent failing (Config.FailFast), so that the seeds or runs in
// progress are abandoned: they would fail too.
func (d *Definition) failFastContext(ctx context.Context) (context.Context, context.CancelFunc) {
	inner, cancel := context.WithCancel(ctx)
	if tripped := d.pool.brk.done(); tripped != nil {
		go func() {
			select {
			case <-tripped:
				cancel()
			case <-inner.Done():
			}
		}()
	}
	return inner, cancel
}

// failing replaces err, the error that ends a run of blocks, by the
// *FailingError that says why when fail-fast stopped it.
func (d *Definition) failing(ctx context.Context, err error) error {
	if f := d.pool.brk.failure(); f != nil && ctx.Err() == nil {
		return f
	}
	return err
}

// emitBlocks emits the results of blocks, in order, each once it is done,
// freeing a slot of window after each: the emitting half of a runner
// (Run, and a recorded population's RunRecords). A skipped block ends it
// with ErrStopped once the blocks in progress are done (or ctx's error);
// a block's error, or emit's, cancels the rest.
func (d *Definition) emitBlocks(ctx context.Context, blocks <-chan *block, window <-chan struct{}, cancel func(), wg *sync.WaitGroup, emit func(*lab.SeedResult) error) error {
	for b := range blocks {
		<-b.done
		if b.skipped {
			if err := ctx.Err(); err != nil {
				return err
			}
			wg.Wait() // the seeds in progress finish and are journaled
			return d.failing(ctx, ErrStopped)
		}
		if b.err != nil {
			cancel()
			drain(blocks)
			return d.failing(ctx, b.err)
		}
		for _, res := range b.results {
			if err := emit(res); err != nil {
				cancel()
				drain(blocks)
				return err
			}
		}
		b.results = nil
		<-window
	}
	return nil
}

// blockSize is how many seeds (or recorded runs) a block of work holds:
// one, or as many as a batch line takes (at most maxBatchSeeds).
func (d *Definition) blockSize() int {
	if b := d.init.Capabilities.Batch; b > 1 {
		return min(b, maxBatchSeeds)
	}
	return 1
}

// drain empties blocks until the dispatcher closes it (after ctx's
// cancellation), so that it never waits on a full channel.
func drain(blocks <-chan *block) {
	go func() {
		for range blocks {
		}
	}()
}

// play fills b.results: journaled seeds from the journal, the others from
// the agent.
func (r *runner) play(ctx context.Context, b *block, j *journal) error {
	def := r.inst.def
	d := &def.init.World
	n := int(b.hi - b.lo)
	b.results = make([]*lab.SeedResult, n)
	var starts []*call
	var fresh []*lab.SeedResult
	for k := range n {
		res := &lab.SeedResult{}
		res.Resize(d, r.plan)
		res.Seed = b.lo + uint64(k)
		b.results[k] = res
		if j != nil {
			if s, ok := j.done[res.Seed]; ok && r.replay(s, res) {
				def.addSpent(s.Spent, true)
				b.dearest = b.dearest.Max(s.Spent)
				continue
			}
			res.Resize(d, r.plan)
			res.Seed = b.lo + uint64(k)
		}
		fresh = append(fresh, res)
		starts = append(starts, r.inst.startCall(res.Seed, r.plan.ForkSteps, res))
	}
	if len(starts) == 0 {
		return nil
	}
	if err := def.pool.do(ctx, starts); err != nil {
		return err
	}
	K := r.plan.Replicas
	var branches []*call
	spent := make([]world.Cost, len(fresh))
	for k, res := range fresh {
		if err := starts[k].err; err != nil {
			*res = lab.SeedResult{Seed: res.Seed, Err: "start: " + errText(err)}
			continue
		}
		// The run to the last fork step is what the start cost.
		spent[k] = res.Forks[len(res.Forks)-1].Cost
		for fi := range res.Forks {
			f := &res.Forks[fi]
			if r.plan.Fires != nil {
				f.Fires = r.plan.Fires(f.Features)
			}
			branches = append(branches, r.inst.branchCall(res.Seed, f.ForkStep, f.Over, f.Checkpoint, r.plan.Arms, K, f.Fires, f.Branches, 0, r.plan.SweepID))
		}
	}
	if err := def.pool.do(ctx, branches); err != nil {
		return err
	}
	next := 0
	var done []*journalSeed
	for k, res := range fresh {
		if res.Err != "" {
			continue
		}
		ok := true
		line := &journalSeed{Seed: res.Seed, Start: starts[k].raw}
		for fi := range res.Forks {
			f := &res.Forks[fi]
			c := branches[next]
			next++
			line.Branch = append(line.Branch, c.raw)
			if c.err != nil {
				text := "branch: " + errText(c.err)
				var over *overFault
				blamed := errors.As(c.err, &over) && len(over.Blamed) == len(f.Branches)
				for bi := range f.Branches {
					if blamed && !over.Blamed[bi] {
						continue // sound: its outcome is the run's, as the others'
					}
					f.Branches[bi] = lab.BranchResult{Err: text}
				}
				ok = false
				continue
			}
			for _, br := range f.Branches {
				if br.Err != "" {
					ok = false
					continue
				}
				spent[k] = spent[k].Add(br.Cost)
			}
		}
		def.addSpent(spent[k], false)
		b.dearest = b.dearest.Max(spent[k])
		if ok && j != nil {
			line.Spent = spent[k]
			done = append(done, line)
		}
	}
	if j != nil {
		return j.add(done)
	}
	return nil
}

// replay fills res from a journal line through the decoders a fresh reply
// goes through; false when the line does not fit (it is played again).
func (r *runner) replay(s *journalSeed, res *lab.SeedResult) bool {
	if len(s.Branch) != len(r.plan.ForkSteps) {
		return false
	}
	if r.inst.startCall(s.Seed, r.plan.ForkSteps, res).decode(s.Start) != nil {
		return false
	}
	for fi := range res.Forks {
		f := &res.Forks[fi]
		if r.plan.Fires != nil {
			f.Fires = r.plan.Fires(f.Features)
		}
		c := r.inst.branchCall(s.Seed, f.ForkStep, f.Over, f.Checkpoint, r.plan.Arms, r.plan.Replicas, f.Fires, f.Branches, 0, r.plan.SweepID)
		if c.decode(s.Branch[fi]) != nil {
			return false
		}
		for _, b := range f.Branches {
			if b.Err != "" {
				return false
			}
		}
	}
	return true
}

// errText is the text an error row carries.
func errText(err error) string {
	return strings.ReplaceAll(err.Error(), ErrAgent.Error()+": ", "")
}
