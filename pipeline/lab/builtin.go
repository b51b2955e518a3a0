package lab

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
)

// Builtin is the Definition of a world implemented in Go: its declaration
// and its constructor. Its runner plays the world in process through
// fork.Lab.
type Builtin[S any] struct {
	Decl world.Declaration
	// New returns the world for resolved parameters, or their error.
	New func(world.Params) (world.World[S], error)
	// StateJSON, if set, appends a state's JSON (the bytes json.Marshal
	// writes) faster than reflection.
	StateJSON func(s *S, b []byte) []byte
	// ObservationJSON, if set, appends the JSON of a state's observation
	// (the bytes json.Marshal writes of World.Observe) faster than
	// reflection: transcripts hold one per step.
	ObservationJSON func(s *S, b []byte) []byte
	// MaxSteps, if set, returns the most steps any run can take with the
	// given parameters.
	MaxSteps func(world.Params) int
}

// Declaration returns the world's declaration.
func (b Builtin[S]) Declaration() world.Declaration { return b.Decl }

// Open returns the world with params and model.
func (b Builtin[S]) Open(params world.Params, model fork.Model) (Instance, error) {
	inst, err := b.OpenLab(params, model)
	if err != nil {
		return nil, err
	}
	return inst, nil
}

// OpenLab is Open with the concrete instance type, for worlds that wrap it
// (the counter replaces its runner with a faster one).
func (b Builtin[S]) OpenLab(params world.Params, model fork.Model) (*BuiltinInstance[S], error) {
	if err := model.Validate(); err != nil {
		return nil, err
	}
	w, err := b.New(params)
	if err != nil {
		return nil, err
	}
	l, err := fork.NewLab(w, model)
	if err != nil {
		return nil, err
	}
	enc, err := fork.NewEncoder[S](l.Decl, params, model)
	if err != nil {
		return nil, err
	}
	if b.StateJSON != nil {
		enc.StateJSON(b.StateJSON)
	}
	inst := &BuiltinInstance[S]{Lab: l, Params: params, Encoder: enc, new: b.New, obsJSON: b.ObservationJSON}
	if b.MaxSteps != nil {
		inst.maxSteps = b.MaxSteps(params)
	}
	return inst, nil
}

// BuiltinInstance is a Go world opened with one configuration.
type BuiltinInstance[S any] struct {
	Lab      fork.Lab[S]
	Params   world.Params
	Encoder  *fork.Encoder[S]
	maxSteps int
	new      func(world.Params) (world.World[S], error)
	obsJSON  func(s *S, b []byte) []byte
}

// Transcripts returns an encoder of the transcripts of this instance's
// branches.
func (i *BuiltinInstance[S]) Transcripts() *TranscriptEncoder[S] {
	return NewTranscriptEncoder(i.Lab.World, i.obsJSON)
}

// MaxSteps is the most steps a run can take, or 0 when unknown.
func (i *BuiltinInstance[S]) MaxSteps() int { return i.maxSteps }

// Declaration returns the world's declaration.
func (i *BuiltinInstance[S]) Declaration() world.Declaration { return i.Lab.Decl }

// Close does nothing.
func (i *BuiltinInstance[S]) Close() error { return nil }

// Checkpoint plays seed's run to forkStep.
func (i *BuiltinInstance[S]) Checkpoint(seed uint64, forkStep int) (ForkResult, error) {
	s := i.Lab.World.Start(seed)
	var hist []world.Action
	i.Lab.Advance(&s, fork.PrefixKey(seed), forkStep, &hist)
	return i.fork(forkStep, &s, hist, nil)
}

// fork describes the checkpoint of state s at forkStep, reusing f's
// slices when f is not nil.
func (i *BuiltinInstance[S]) fork(forkStep int, s *S, hist []world.Action, f *ForkResult) (ForkResult, error) {
	if f == nil {
		f = &ForkResult{}
	}
	w := i.Lab.World
	f.ForkStep = forkStep
	f.Over = w.Over(s)
	f.Features = w.Features(s, f.Features[:0])
	f.Hidden = w.Hidden(s, f.Hidden[:0])
	f.Cost = w.Cost(s)
	var err error
	f.Checkpoint, err = i.Encoder.Append(f.Checkpoint[:0], forkStep, hist, s)
	return *f, err
}

// Branch decodes, verifies and forks a checkpoint.
func (i *BuiltinInstance[S]) Branch(checkpoint []byte, arm fork.Arm, replica int, rule func([]world.Value) bool) (Outcome, error) {
	return i.branch(checkpoint, arm, replica, rule, false)
}

// Replay is Branch with the branch's transcript: the steps the sweep's
// runner records with Plan.Transcripts, byte for byte.
func (i *BuiltinInstance[S]) Replay(checkpoint []byte, arm fork.Arm, replica int, rule func([]world.Value) bool) (Outcome, error) {
	return i.branch(checkpoint, arm, replica, rule, true)
}

func (i *BuiltinInstance[S]) branch(checkpoint []byte, arm fork.Arm, replica int, rule func([]world.Value) bool, transcript bool) (Outcome, error) {
	c, err := fork.DecodeCheckpoint[S](checkpoint, i.Lab.Decl)
	if err != nil {
		return Outcome{}, err
	}
	lab, inst := i.Lab, i
	if !sameParams(c.Params, i.Params) || c.Model != lab.Model {
		// The checkpoint's own configuration decides its branches.
		other, err := (Builtin[S]{Decl: lab.Decl, New: i.new, ObservationJSON: i.obsJSON}).OpenLab(c.Params, c.Model)
		if err != nil {
			return Outcome{}, fmt.Errorf("%w: %v", fork.ErrCheckpoint, err)
		}
		lab, inst = other.Lab, other
	}
	if err := fork.Verify(lab, c); err != nil {
		return Outcome{}, err
	}
	if err := lab.Supports(arm); err != nil {
		return Outcome{}, err
	}
	w := lab.World
	fires := false
	if rule != nil {
		fires = rule(w.Features(&c.State, nil))
	}
	seed := w.Seed(&c.State)
	var (
		final S
		enc   *TranscriptEncoder[S]
		trace fork.Trace[S]
	)
	if transcript {
		enc = inst.Transcripts()
		enc.Begin(nil, w.Cost(&c.State))
		trace = enc.Trace()
	}
	ok, iv := lab.BranchTrace(&final, &c.State, seed, c.ForkStep, arm, replica, fires, trace)
	obs, err := json.Marshal(w.Observe(&final))
	if err != nil {
		return Outcome{}, err
	}
	out := Outcome{Seed: seed, ForkStep: c.ForkStep, Final: obs,
		BranchResult: BranchResult{Success: ok, Intervened: iv, Cost: w.Cost(&final).Sub(w.Cost(&c.State))}}
	if sc, scored := w.(world.Scorer[S]); scored {
		x := sc.Score(&final)
		out.Score = &x
	}
	if enc != nil {
		if out.Transcript, err = enc.End(); err != nil {
			return Outcome{}, fmt.Errorf("transcript: %w", err)
		}
	}
	return out, nil
}

func sameParams(a, b world.Params) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// Runner returns the in-process runner of plan.
func (i *BuiltinInstance[S]) Runner(plan Plan) (Runner, error) {
	if err := CheckPlan(i.Lab.Decl, plan); err != nil {
		return nil, err
	}
	r := &builtinRunner[S]{inst: i, plan: plan}
	r.enc, r.trace = i.planTranscripts(plan)
	return r, nil
}

// planTranscripts is the encoder and trace of the branches' transcripts
// when plan asks for them (Plan.Transcripts), else nil.
func (i *BuiltinInstance[S]) planTranscripts(plan Plan) (*TranscriptEncoder[S], fork.Trace[S]) {
	if !plan.Transcripts {
		return nil, nil
	}
	enc := i.Transcripts()
	return enc, enc.Trace()
}

// builtinRunner plays seeds through fork.Lab, reusing its buffers. The
// run's state and a branch's live here, so that passing them by pointer to
// the world allocates nothing per seed.
type builtinRunner[S any] struct {
	inst     *BuiltinInstance[S]
	plan     Plan
	res      SeedResult
	hist     []world.Action
	s, final S
	// enc and trace record transcripts when the plan asks for them.
	enc   *TranscriptEncoder[S]
	trace fork.Trace[S]
}

func (r *builtinRunner[S]) Run(ctx context.Context, lo, hi uint64, emit func(*SeedResult) error) error {
	l := &r.inst.Lab
	w := l.World
	decl := &l.Decl
	K := r.plan.Replicas
	scorer, scored := w.(world.Scorer[S])
	for seed := lo; seed < hi; seed++ {
		if seed&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		res := &r.res
		res.Resize(decl, r.plan)
		res.Seed = seed
		s, final := &r.s, &r.final
		*s = w.Start(seed)
		res.Task = w.Task(s, res.Task)
		r.hist = r.hist[:0]
		prefix := fork.PrefixKey(seed)
		for fi := range res.Forks {
			f := &res.Forks[fi]
			l.Advance(s, prefix, f.ForkStep, &r.hist)
			if _, err := r.inst.fork(f.ForkStep, s, r.hist, f); err != nil {
				return fmt.Errorf("seed %d fork step %d: checkpoint: %w", seed, f.ForkStep, err)
			}
			if r.plan.Fires != nil {
				f.Fires = r.plan.Fires(f.Features)
			}
			at := w.Cost(s)
			for ai, arm := range r.plan.Arms {
				for rep := range K {
					b := &f.Branches[ai*K+rep]
					if r.enc != nil {
						r.enc.Begin(b.Transcript, at)
					}
					b.Success, b.Intervened = l.BranchTrace(final, s, seed, f.ForkStep, arm, rep, f.Fires, r.trace)
					b.Cost = w.Cost(final).Sub(at)
					if scored {
						f.SetScore(ai*K+rep, scorer.Score(final))
					}
					if r.enc != nil {
						var err error
						if b.Transcript, err = r.enc.End(); err != nil {
							return fmt.Errorf("seed %d fork step %d: transcript: %w", seed, f.ForkStep, err)
						}
					}
				}
			}
		}
		if err := emit(res); err != nil {
			return err
		}
	}
	return nil
}

// Start begins seed's run.
func (i *BuiltinInstance[S]) Start(seed uint64) Play {
	return &builtinPlay[S]{inst: i, s: i.Lab.World.Start(seed)}
}

// Intervention returns the action arm applies at a fork.
func (i *BuiltinInstance[S]) Intervention(arm fork.Arm, fires bool) (world.Action, bool) {
	return i.Lab.Intervention(arm, fires)
}

// builtinPlay is a Play over a Go world's state.
type builtinPlay[S any] struct {
	inst *BuiltinInstance[S]
	s    S
}

func (p *builtinPlay[S]) Seed() uint64 { return p.inst.Lab.World.Seed(&p.s) }
func (p *builtinPlay[S]) Over() bool   { return p.inst.Lab.World.Over(&p.s) }
func (p *builtinPlay[S]) Steps() int   { return p.inst.Lab.World.Steps(&p.s) }
func (p *builtinPlay[S]) Choose(key uint64) world.Action {
	w := p.inst.Lab.World
	greedy := w.Script(&p.s)
	if p.inst.Lab.Model.Temperature == 0 {
		return greedy
	}
	return p.inst.Lab.Model.Choose(greedy, w.Tools(), key, w.Steps(&p.s))
}
func (p *builtinPlay[S]) Step(a world.Action) { p.inst.Lab.World.Step(&p.s, a) }
func (p *builtinPlay[S]) Success() bool       { return p.inst.Lab.World.Success(&p.s) }
func (p *builtinPlay[S]) Score() (float64, bool) {
	if sc, ok := p.inst.Lab.World.(world.Scorer[S]); ok {
		return sc.Score(&p.s), true
	}
	return 0, false
}
func (p *builtinPlay[S]) Observe() any { return p.inst.Lab.World.Observe(&p.s) }
func (p *builtinPlay[S]) Task(dst []world.Value) []world.Value {
	return p.inst.Lab.World.Task(&p.s, dst)
}
func (p *builtinPlay[S]) Features(dst []world.Value) []world.Value {
	return p.inst.Lab.World.Features(&p.s, dst)
}
func (p *builtinPlay[S]) Hidden(dst []world.Value) []world.Value {
	return p.inst.Lab.World.Hidden(&p.s, dst)
}
func (p *builtinPlay[S]) Cost() world.Cost { return p.inst.Lab.World.Cost(&p.s) }
func (p *builtinPlay[S]) Clone() Play      { c := *p; return &c }
func (p *builtinPlay[S]) Checkpoint(forkStep int, hist []world.Action) ([]byte, error) {
	return p.inst.Encoder.Append(nil, forkStep, hist, &p.s)
}
