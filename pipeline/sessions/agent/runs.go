package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/sessions/session"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/stream/client"
)

// PlayOptions configure a sweep played on the session log.
type PlayOptions struct {
	// Prefix names the sweep's streams: PREFIX/cCONFIG/sSEED for a run,
	// PREFIX/cCONFIG/sSEED/fSTEP/ARM/rREPLICA for a branch. The run
	// streams must not exist yet.
	Prefix string
	// Parallel is the number of seeds each runner plays at once (default
	// 16). A sweep runs one runner per worker.
	Parallel int
	// RetryFor bounds how long an unreachable log is retried (default 2m).
	RetryFor time.Duration
	// Logf reports retries; nil is silent.
	Logf func(format string, args ...any)
}

// Runners returns the sweep.Options.Runners of a sweep played entirely on
// the session log (forklab sweep --from-log), for any world: every seed's
// run is a session stream played to the last fork step, every checkpoint
// is the fold of its events up to the fork step's offset, and every branch
// is a child stream forked from that offset and finished by a worker. The
// runner fills lab.SeedResult from those folds — the task, each
// checkpoint's JSON, features, hidden truth, cost and over flag, each
// branch's success, intervention and cost — so the sweep writes its tables
// from the log, and they come out byte for byte the in-memory sweep's:
// every state is the fold of the events the log holds, and the fold
// replays the world's own step function.
func Runners(c *client.Client, r sweep.Resolved, o PlayOptions) func(sweep.Config, lab.Plan) (lab.Runner, error) {
	if o.Parallel <= 0 {
		o.Parallel = 16
	}
	return func(cfg sweep.Config, plan lab.Plan) (lab.Runner, error) {
		if err := lab.CheckPlan(r.Decl, plan); err != nil {
			return nil, err
		}
		return &logRunner{c: c, decl: r.Decl, cfg: cfg, plan: plan, o: o}, nil
	}
}

// logRunner plays one configuration's seeds on the log.
type logRunner struct {
	c    *client.Client
	decl world.Declaration
	cfg  sweep.Config
	plan lab.Plan
	o    PlayOptions
}

// Costly tells the sweep to write this runner's units buffered: a unit is
// never played twice, since its streams may exist only once.
func (r *logRunner) Costly() bool { return true }

// Run plays seeds [lo, hi), Parallel at a time, and emits them in seed
// order.
func (r *logRunner) Run(ctx context.Context, lo, hi uint64, emit func(*lab.SeedResult) error) error {
	type job struct {
		seed uint64
		res  *lab.SeedResult
		err  error
		done chan struct{}
	}
	queue := make(chan *job, r.o.Parallel)
	sem := make(chan struct{}, r.o.Parallel)
	// On return: stop the producer and the seeds in flight, then wait
	// for them (defers run last first).
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(queue)
		for seed := lo; seed < hi; seed++ {
			j := &job{seed: seed, done: make(chan struct{})}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				j.res, j.err = r.playSeed(ctx, j.seed)
				<-sem
				close(j.done)
			}()
			select {
			case queue <- j:
			case <-ctx.Done():
				return
			}
		}
	}()
	for j := range queue {
		<-j.done
		if j.err != nil {
			return j.err
		}
		if err := emit(j.res); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// forkPoint is the fold of a run at one fork step, and the offset there.
type forkPoint struct {
	s      session.Session
	offset string
}

// playSeed plays seed's run to its last fork step, recording the fold and
// the offset at each fork step, then forks and finishes every branch.
func (r *logRunner) playSeed(ctx context.Context, seed uint64) (*lab.SeedResult, error) {
	name := fmt.Sprintf("%s/c%d/s%d", r.o.Prefix, r.cfg.ID, seed)
	look := Worker{Log: r.c, Logf: r.o.Logf, RetryFor: r.o.RetryFor}
	err := look.retry(ctx, "look up "+name, func() error {
		_, err := r.c.Head(ctx, name)
		return err
	})
	if err == nil {
		return nil, fmt.Errorf("stream %s exists already: use a new --log-prefix", name)
	} else if !client.IsNotFound(err) {
		return nil, fmt.Errorf("look up %s: %w", name, err)
	}
	start := session.Start(r.decl, r.cfg.Params, r.cfg.Model, seed)
	steps := r.plan.ForkSteps
	var shadow session.Session
	if err := shadow.Apply(start); err != nil {
		return nil, err
	}
	res := &lab.SeedResult{Seed: seed}
	res.Resize(&r.decl, r.plan)
	res.Task = shadow.Play.Task(res.Task)
	at := make([]forkPoint, 0, len(steps))
	var shadowErr error
	record := func(tail string) {
		for len(at) < len(steps) && shadow.Between() && (shadow.Play.Over() || shadow.Play.Steps() >= steps[len(at)]) {
			at = append(at, forkPoint{shadow, tail})
		}
	}
	w := Worker{Log: r.c, Stream: name, Start: &start, Until: steps[len(steps)-1], Logf: r.o.Logf, RetryFor: r.o.RetryFor,
		OnAppend: func(e session.Event, tail string) {
			if e.Type != session.TypeStart && shadowErr == nil {
				shadowErr = shadow.Apply(e) // the worker folded the same event already
			}
			record(tail)
		}}
	if _, err := w.Run(ctx); err != nil {
		return nil, err
	}
	if shadowErr != nil {
		return nil, fmt.Errorf("%s: %w", name, shadowErr)
	}
	if len(at) != len(steps) {
		return nil, fmt.Errorf("%s: the run stopped before fork step %d", name, steps[len(at)])
	}
	K := r.plan.Replicas
	for i, p := range at {
		f := &res.Forks[i]
		var err error
		if f.Checkpoint, err = p.s.Checkpoint(f.ForkStep); err != nil {
			return nil, fmt.Errorf("%s at fork step %d: %w", name, f.ForkStep, err)
		}
		f.Features = p.s.Play.Features(f.Features)
		f.Hidden = p.s.Play.Hidden(f.Hidden)
		f.Cost = p.s.Play.Cost()
		f.Over = p.s.Play.Over()
		if r.plan.Fires != nil {
			f.Fires = r.plan.Fires(f.Features)
		}
		fired := f.Fires
		for ai, arm := range r.plan.Arms {
			for rep := range K {
				child := fmt.Sprintf("%s/f%d/%s/r%d", name, f.ForkStep, arm, rep)
				bw := Worker{Log: r.c, Logf: r.o.Logf, RetryFor: r.o.RetryFor}
				br, err := forkWith(ctx, bw, name, p.offset, child, f.ForkStep, arm, rep,
					func(*session.Session) (bool, error) { return fired, nil })
				if err != nil && !errors.Is(err, ErrFinished) {
					return nil, err
				}
				s := br.Session
				if s.Outcome == nil || s.Branch == nil {
					return nil, fmt.Errorf("%s: the branch did not finish", child)
				}
				b := &f.Branches[ai*K+rep]
				b.Success, b.Intervened = *s.Outcome.Success, s.Branch.Recovery != ""
				b.Cost = s.Play.Cost().Sub(f.Cost)
				if x, ok := s.Play.Score(); ok {
					f.SetScore(ai*K+rep, x)
				}
			}
		}
	}
	return res, nil
}
