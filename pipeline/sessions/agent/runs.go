package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/sessions/session"
	"github.com/forklab/forklab/pipeline/worlds/counter"
	"github.com/forklab/forklab/stream/client"
)

// Runs is a sweep played on the session log: every seed's run is a session
// stream, stopped after the prefix to the last fork step, and every branch
// is a child stream forked from it at its fork step's offset. It implements
// sweep.Runs, so the sweep writes its tables from the log's folds; they come
// out identical to the in-memory sweep's because every state is the fold of
// the events the log holds.
type Runs struct {
	prefixes map[prefixKey]prefixRun
	branches map[branchKey]branchRun
}

type prefixKey struct {
	config, seed uint64
	forkStep     int
}

type prefixRun struct {
	state  counter.State
	hist   []fork.Turn
	offset string
}

type branchKey struct {
	prefixKey
	arm     fork.Arm
	replica int
}

type branchRun struct {
	final               counter.State
	success, intervened bool
}

var _ sweep.Runs = (*Runs)(nil)

// Prefix implements sweep.Runs.
func (r *Runs) Prefix(config, seed uint64, forkStep int) (counter.State, []fork.Turn, error) {
	p, ok := r.prefixes[prefixKey{config, seed, forkStep}]
	if !ok {
		return counter.State{}, nil, fmt.Errorf("no session for config %d seed %d fork step %d", config, seed, forkStep)
	}
	return p.state, p.hist, nil
}

// Branch implements sweep.Runs.
func (r *Runs) Branch(config, seed uint64, forkStep int, arm fork.Arm, replica int) (counter.State, bool, bool, error) {
	b, ok := r.branches[branchKey{prefixKey{config, seed, forkStep}, arm, replica}]
	if !ok {
		return counter.State{}, false, false, fmt.Errorf("no branch for config %d seed %d fork step %d arm %s replica %d", config, seed, forkStep, arm, replica)
	}
	return b.final, b.success, b.intervened, nil
}

// PlayOptions configure PlaySweep.
type PlayOptions struct {
	// Prefix names the sweep's streams: PREFIX/cCONFIG/sSEED for a run,
	// PREFIX/cCONFIG/sSEED/fSTEP/ARM/rREPLICA for a branch. The streams
	// must not exist yet.
	Prefix string
	// Parallel is the number of seeds played at once (default 16).
	Parallel int
	// Logf reports retries; Progress is called with finished seeds.
	Logf     func(format string, args ...any)
	Progress func(seeds int)
}

// PlaySweep plays every run and branch of spec on the log.
func PlaySweep(ctx context.Context, c *client.Client, spec sweep.Spec, o PlayOptions) (*Runs, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	par := o.Parallel
	if par <= 0 {
		par = 16
	}
	r := &Runs{prefixes: map[prefixKey]prefixRun{}, branches: map[branchKey]branchRun{}}
	var mu sync.Mutex
	type job struct {
		config sweep.Config
		seed   uint64
	}
	jobs := make(chan job)
	errc := make(chan error, par)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if err := playSeed(ctx, c, spec, o, j.config, j.seed, r, &mu); err != nil {
					errc <- err
					cancel()
					return
				}
				if o.Progress != nil {
					o.Progress(1)
				}
			}
		}()
	}
feed:
	for _, cfg := range spec.Configs() {
		for seed := spec.Seeds.Start; seed < spec.Seeds.End; seed++ {
			select {
			case jobs <- job{cfg, seed}:
			case <-ctx.Done():
				break feed
			}
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errc:
		return nil, err
	default:
	}
	return r, ctx.Err()
}

// playSeed plays one seed's run to its last fork step, recording the
// offset, state and history at each fork step, then every branch.
func playSeed(ctx context.Context, c *client.Client, spec sweep.Spec, o PlayOptions, cfg sweep.Config, seed uint64, r *Runs, mu *sync.Mutex) error {
	name := fmt.Sprintf("%s/c%d/s%d", o.Prefix, cfg.ID, seed)
	if _, err := c.Head(ctx, name); err == nil {
		return fmt.Errorf("stream %s exists already: use a new --log-prefix", name)
	} else if !client.IsNotFound(err) {
		return err
	}
	start := session.Start(cfg.Params, cfg.Model, seed)
	steps := spec.ForkAt
	var shadow session.Session
	shadow.Apply(start)
	at := map[int]prefixRun{}
	next := 0
	record := func(tail string) {
		o := shadow.World.Observe(shadow.State)
		for next < len(steps) && shadow.Between() && (o.Over || o.Steps >= steps[next]) {
			at[steps[next]] = prefixRun{state: shadow.State, hist: slices.Clone(shadow.History), offset: tail}
			next++
		}
	}
	w := Worker{Log: c, Stream: name, Start: &start, Until: steps[len(steps)-1], Logf: o.Logf,
		OnAppend: func(e session.Event, tail string) {
			if e.Type != session.TypeStart {
				if err := shadow.Apply(e); err != nil {
					panic(err) // the worker folded the same event already
				}
			}
			record(tail)
		}}
	if _, err := w.Run(ctx); err != nil {
		return err
	}
	if next != len(steps) {
		return fmt.Errorf("%s: the run stopped before fork step %d", name, steps[next])
	}
	branches := map[branchKey]branchRun{}
	for _, f := range steps {
		p := at[f]
		fires := spec.Policy != nil && spec.Policy.Fires(shadow.World.Features(p.state))
		for _, arm := range spec.Arms {
			for rep := range spec.Replicas {
				child := fmt.Sprintf("%s/f%d/%s/r%d", name, f, arm, rep)
				bw := Worker{Log: c, Logf: o.Logf}
				res, err := Fork(ctx, bw, name, p.offset, child, f, arm, rep, spec.Policy)
				if err != nil && !errors.Is(err, ErrFinished) {
					return err
				}
				s := res.Session
				if s.Outcome == nil {
					return fmt.Errorf("%s: the branch did not finish", child)
				}
				_, intervened := fork.Intervention(arm, fires)
				branches[branchKey{prefixKey{uint64(cfg.ID), seed, f}, arm, rep}] = branchRun{final: s.State, success: *s.Outcome.Success, intervened: intervened}
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for f, p := range at {
		r.prefixes[prefixKey{uint64(cfg.ID), seed, f}] = p
	}
	for k, b := range branches {
		r.branches[k] = b
	}
	return nil
}
