package counter

import (
	"context"
	"fmt"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/pipeline/worlds/pyrand"
)

func init() { lab.Register(Definition) }

// Definition is the counter world as the lab's registry holds it: the
// generic in-process world (lab.Builtin), whose sweeps run on the faster
// Lab below instead of fork.Lab. TestRunnerMatchesBuiltin holds the two
// runners' results equal.
var Definition lab.Definition = definition{lab.Builtin[State]{Decl: declaration, New: newWorld, StateJSON: (*State).AppendJSON,
	ObservationJSON: AppendObservation, MaxSteps: func(p world.Params) int { return ParamsOf(p).MaxBudget() }}}

func newWorld(p world.Params) (world.World[State], error) {
	w, err := New(ParamsOf(p))
	if err != nil {
		return nil, err
	}
	return w, nil
}

type definition struct{ lab.Builtin[State] }

// Open returns the counter world with params and model; its runner is the
// fast one.
func (d definition) Open(params world.Params, model fork.Model) (lab.Instance, error) {
	inst, err := d.OpenLab(params, model)
	if err != nil {
		return nil, err
	}
	return &instance{BuiltinInstance: inst}, nil
}

// instance is a lab.BuiltinInstance whose Runner is Runner.
type instance struct{ *lab.BuiltinInstance[State] }

func (i *instance) Runner(plan lab.Plan) (lab.Runner, error) {
	if err := lab.CheckPlan(i.Lab.Decl, plan); err != nil {
		return nil, err
	}
	r := &runner{inst: i.BuiltinInstance, lab: &Lab{World: i.Lab.World.(World), Model: i.Lab.Model}, plan: plan}
	if plan.Transcripts {
		r.enc = i.Transcripts()
		r.trace = r.enc.Trace()
	}
	return r, nil
}

// runner plays seeds with the counter's own Lab, seeding pyrand.BatchLanes
// task generators at once.
type runner struct {
	inst  *lab.BuiltinInstance[State]
	lab   *Lab
	plan  lab.Plan
	batch *pyrand.Batch
	res   lab.SeedResult
	hist  []world.Action
	seeds []uint64
	// s and final are the run's state and a branch's, kept here so that
	// passing them by pointer allocates nothing per seed.
	s, final State
	// enc and trace record transcripts when the plan asks for them.
	enc   *lab.TranscriptEncoder[State]
	trace fork.Trace[State]
}

// Run plays seeds [lo, hi).
func (r *runner) Run(ctx context.Context, lo, hi uint64, emit func(*lab.SeedResult) error) error {
	if r.batch == nil {
		r.batch = new(pyrand.Batch)
	}
	for base := lo; base < hi; base += pyrand.BatchLanes {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(uint64(pyrand.BatchLanes), hi-base)
		if n == pyrand.BatchLanes {
			r.batch.SeedRange(base)
		} else {
			r.seeds = r.seeds[:0]
			for l := range n {
				r.seeds = append(r.seeds, base+l)
			}
			r.batch.Seed(r.seeds)
		}
		for l := range n {
			seed := base + l
			r.s = r.lab.World.StartWith(seed, r.batch.Lane(int(l)))
			if err := r.seed(seed); err != nil {
				return err
			}
			if err := emit(&r.res); err != nil {
				return err
			}
		}
	}
	return nil
}

// seed fills r.res with seed's results from its start state r.s.
func (r *runner) seed(seed uint64) error {
	s, final := &r.s, &r.final
	res := &r.res
	res.Resize(&r.inst.Lab.Decl, r.plan)
	res.Seed = seed
	w := &r.lab.World
	res.Task = w.Task(s, res.Task)
	r.hist = r.hist[:0]
	prefix := fork.PrefixKey(seed)
	K := r.plan.Replicas
	for fi := range res.Forks {
		f := &res.Forks[fi]
		r.lab.Advance(s, prefix, f.ForkStep, &r.hist)
		f.Over = over(s)
		f.Features = w.Features(s, f.Features)
		f.Hidden = w.Hidden(s, f.Hidden)
		f.Cost = world.Cost{Steps: int64(s.Steps)}
		var err error
		if f.Checkpoint, err = r.inst.Encoder.Append(f.Checkpoint, f.ForkStep, r.hist, s); err != nil {
			return fmt.Errorf("seed %d fork step %d: checkpoint: %w", seed, f.ForkStep, err)
		}
		if r.plan.Fires != nil {
			f.Fires = r.plan.Fires(f.Features)
		}
		for ai, arm := range r.plan.Arms {
			for rep := range K {
				b := &f.Branches[ai*K+rep]
				if r.enc == nil {
					b.Success, b.Intervened = r.lab.Branch(final, s, seed, f.ForkStep, arm, rep, f.Fires)
				} else {
					r.enc.Begin(b.Transcript, f.Cost)
					b.Success, b.Intervened = r.lab.BranchTrace(final, s, seed, f.ForkStep, arm, rep, f.Fires, r.trace)
					if b.Transcript, err = r.enc.End(); err != nil {
						return fmt.Errorf("seed %d fork step %d: transcript: %w", seed, f.ForkStep, err)
					}
				}
				b.Cost = world.Cost{Steps: int64(final.Steps - s.Steps)}
			}
		}
	}
	return nil
}
