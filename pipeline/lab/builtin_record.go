package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
)

// Recorded returns the record runner of plan: it decodes each record's
// checkpoints as this world's (strictly, as forklab fork does), verifies
// each by replaying its seed's run to its fork step, computes the run's
// task, features, hidden truth, cost and over flag from the state, and
// forks it exactly as a seed's run is forked at that step. A checkpoint of
// a seed gives that seed's rows, byte for byte.
func (i *BuiltinInstance[S]) Recorded(plan Plan) (RecordRunner, error) {
	if err := CheckPlan(i.Lab.Decl, plan); err != nil {
		return nil, err
	}
	r := &builtinRecords[S]{inst: i, plan: plan}
	r.enc, r.trace = i.planTranscripts(plan)
	return r, nil
}

// builtinRecords forks recorded checkpoints of a Go world.
type builtinRecords[S any] struct {
	inst   *BuiltinInstance[S]
	plan   Plan
	res    SeedResult
	states []S // the decoded state of each fork step present
	final  S
	hist   []world.Action
	// enc and trace record transcripts when the plan asks for them, as
	// the seeds' runner does.
	enc   *TranscriptEncoder[S]
	trace fork.Trace[S]
}

// RunRecords forks every record next yields, in order.
func (r *builtinRecords[S]) RunRecords(ctx context.Context, next Records, emit func(*SeedResult) error) error {
	for n := 0; ; n++ {
		if n&255 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		rec, err := next(ctx)
		if err != nil || rec == nil {
			return err
		}
		if err := r.record(rec); err != nil {
			return err
		}
		if err := emit(&r.res); err != nil {
			return err
		}
	}
}

// record fills r.res from one record.
func (r *builtinRecords[S]) record(rec *Record) error {
	l := &r.inst.Lab
	w := l.World
	d := &l.Decl
	res := &r.res
	res.Resize(d, r.plan)
	res.RunID = rec.RunID
	res.Metadata = append(res.Metadata, rec.Metadata...)
	if len(rec.Forks) == 0 {
		return BadRecord(rec.Where, "no checkpoint: world %s forks the checkpoints a record holds", d.Name)
	}
	if cap(r.states) < len(res.Forks) {
		r.states = make([]S, len(res.Forks))
	}
	r.states = r.states[:len(res.Forks)]
	for fi := range res.Forks {
		res.Forks[fi].Absent = true
	}
	var seed uint64
	seeded := false
	for k := range rec.Forks {
		rf := &rec.Forks[k]
		if rf.Err != "" {
			fi := slices.Index(r.plan.ForkSteps, rf.ForkStep)
			if fi < 0 {
				return fmt.Errorf("%s: an error at fork step %d, which the sweep does not fork at", rec.Where, rf.ForkStep)
			}
			f := &res.Forks[fi]
			f.Absent, f.Err = false, rf.Err
			continue
		}
		c, err := fork.DecodeCheckpoint[S](rf.Checkpoint, *d)
		if err != nil {
			return &RecordError{Where: rec.Where, Err: fmt.Errorf("world %s cannot decode its checkpoint: %w", d.Name, err)}
		}
		if rf.ForkStep != 0 && rf.ForkStep != c.ForkStep {
			return BadRecord(rec.Where, "fork_step is %d, but its checkpoint was taken at fork step %d", rf.ForkStep, c.ForkStep)
		}
		fi := slices.Index(r.plan.ForkSteps, c.ForkStep)
		if fi < 0 {
			return BadRecord(rec.Where, "its checkpoint was taken at fork step %d, which this sweep does not fork at (fork steps %s)", c.ForkStep, stepsText(r.plan.ForkSteps))
		}
		if !res.Forks[fi].Absent {
			return BadRecord(rec.Where, "two checkpoints at fork step %d", c.ForkStep)
		}
		if !reflect.DeepEqual(c.Params, r.inst.Params) && !sameParams(c.Params, r.inst.Params) || c.Model != l.Model {
			return BadRecord(rec.Where, "its checkpoint was taken with other parameters or another model than the sweep's (%s): sweep it with the checkpoint's (--param, --temperature, --no-tool)", configDiff(c.Params, c.Model, r.inst.Params, l.Model))
		}
		if err := fork.Verify(*l, c); err != nil {
			return &RecordError{Where: rec.Where, Err: err}
		}
		s := w.Seed(&c.State)
		switch {
		case rec.Seed != nil && *rec.Seed != s:
			return BadRecord(rec.Where, "seed is %d, but its checkpoint is of seed %d", *rec.Seed, s)
		case seeded && s != seed:
			return BadRecord(rec.Where, "its checkpoints are of seeds %d and %d: a run has one", seed, s)
		}
		seed, seeded = s, true
		f := &res.Forks[fi]
		f.Absent = false
		r.states[fi] = c.State
		st := &r.states[fi]
		f.Over = w.Over(st)
		f.Features = w.Features(st, f.Features[:0])
		f.Hidden = w.Hidden(st, f.Hidden[:0])
		f.Cost = w.Cost(st)
		r.hist = r.hist[:0]
		for _, t := range c.History {
			a, _ := d.Action(t.Action) // Verify compared them with the replay's
			r.hist = append(r.hist, a)
		}
		if f.Checkpoint, err = r.inst.Encoder.Append(f.Checkpoint[:0], c.ForkStep, r.hist, st); err != nil {
			return fmt.Errorf("%s: checkpoint: %w", rec.Where, err)
		}
		if f.Err, err = r.agrees(rec.Where, rf, f); err != nil {
			return err
		}
	}
	switch {
	case seeded:
		res.Seed = seed
	case rec.Seed != nil:
		res.Seed = *rec.Seed
	default:
		res.Seed, res.NoSeed = RunKey(rec.RunID), true
	}
	switch {
	case seeded:
		// What the seed drew: a state keeps its task (Verify replayed
		// the seed's run to it).
		for fi := range res.Forks {
			if !res.Forks[fi].Absent && res.Forks[fi].Err == "" {
				res.Task = w.Task(&r.states[fi], res.Task)
				break
			}
		}
	case rec.Seed != nil:
		start := w.Start(res.Seed)
		res.Task = w.Task(&start, res.Task)
	default:
		res.Task = nullValues(res.Task, len(d.Task))
	}
	K := r.plan.Replicas
	scorer, scored := w.(world.Scorer[S])
	for fi := range res.Forks {
		f := &res.Forks[fi]
		if f.Absent || f.Err != "" {
			continue
		}
		st := &r.states[fi]
		if r.plan.Fires != nil {
			f.Fires = r.plan.Fires(f.Features)
		}
		at := w.Cost(st)
		for ai, arm := range r.plan.Arms {
			for rep := range K {
				b := &f.Branches[ai*K+rep]
				if r.enc != nil {
					r.enc.Begin(b.Transcript, at)
				}
				b.Success, b.Intervened = l.BranchTrace(&r.final, st, res.Seed, f.ForkStep, arm, rep, f.Fires, r.trace)
				b.Cost = w.Cost(&r.final).Sub(at)
				if scored {
					f.SetScore(ai*K+rep, scorer.Score(&r.final))
				}
				if r.enc != nil {
					var err error
					if b.Transcript, err = r.enc.End(); err != nil {
						return fmt.Errorf("%s fork step %d: transcript: %w", rec.Where, f.ForkStep, err)
					}
				}
			}
		}
	}
	return nil
}

// agrees is Disagreement with the world's own computation.
func (r *builtinRecords[S]) agrees(where string, rf *RecordFork, f *ForkResult) (string, error) {
	d := &r.inst.Lab.Decl
	return Disagreement(where, d, "world "+d.Name+" computes from its checkpoint", "from the checkpoint", rf, f)
}

// Disagreement compares what record fork rf says of its checkpoint
// (features, hidden truth, over) with what the world computed into f, by
// says how ("world counter computes from its checkpoint") and from how it
// is named in the message ("from the checkpoint"). A difference is the
// fork's error text — an error row: reported, never silently overridden —
// naming the record, the field and both values; a value the declaration
// refuses is a *RecordError.
func Disagreement(where string, d *world.Declaration, by, from string, rf *RecordFork, f *ForkResult) (string, error) {
	for _, g := range []struct {
		name   string
		raw    json.RawMessage
		fields []world.Field
		have   []world.Value
	}{{"features", rf.Features, d.Features, f.Features}, {"hidden", rf.Hidden, d.Hidden, f.Hidden}} {
		if g.raw == nil {
			continue
		}
		vals, err := ParseObject(g.name, g.fields, g.raw, nil)
		if err != nil {
			return "", &RecordError{Where: where, Err: err}
		}
		for k, fd := range g.fields {
			if vals[k] != g.have[k] {
				return fmt.Sprintf("%s: %s disagree with what %s: %s.%s is %s in the record, %s %s",
					where, g.name, by, g.name, fd.Name, valueText(fd, vals[k]), valueText(fd, g.have[k]), from), nil
			}
		}
	}
	if rf.Over != nil && *rf.Over != f.Over {
		return fmt.Sprintf("%s: over disagrees with what %s: %t in the record, %t %s", where, by, *rf.Over, f.Over, from), nil
	}
	return "", nil
}

// ParseObject reads a JSON object of declared values (a record's features
// or hidden truth) into dst in declaration order, as world.ParseValues
// does; where names the object in errors ("features").
func ParseObject(where string, fields []world.Field, raw json.RawMessage, dst []world.Value) ([]world.Value, error) {
	var vals map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&vals); err != nil || vals == nil {
		return dst, fmt.Errorf("%s must be a JSON object of the declared fields", where)
	}
	return world.ParseValues(where, fields, vals, dst)
}

// nullValues appends n null values to dst.
func nullValues(dst []world.Value, n int) []world.Value {
	for range n {
		dst = append(dst, world.NullValue())
	}
	return dst
}

func valueText(f world.Field, v world.Value) string {
	if v.Null {
		return "null"
	}
	return v.Text(f.Kind)
}

// configDiff names the first parameter, or the model, that differs
// between a checkpoint's configuration and the sweep's.
func configDiff(cp world.Params, cm fork.Model, sp world.Params, sm fork.Model) string {
	for _, k := range slices.Sorted(maps.Keys(sp)) {
		if cp.Text(k) != sp.Text(k) {
			return fmt.Sprintf("%s %s in the checkpoint, %s in the sweep", k, cp.Text(k), sp.Text(k))
		}
	}
	if cm != sm {
		return fmt.Sprintf("model temperature %g, no_tool %g in the checkpoint; %g, %g in the sweep", cm.Temperature, cm.NoTool, sm.Temperature, sm.NoTool)
	}
	return "they differ"
}

// stepsText lists fork steps as "3" or "1,2,3".
func stepsText(steps []int) string {
	s := make([]string, len(steps))
	for i, x := range steps {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}
