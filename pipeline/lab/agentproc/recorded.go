package agentproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sync"

	"github.com/forklab/forklab/pipeline/lab"
	population "github.com/forklab/forklab/pipeline/lab/recorded"
	"github.com/forklab/forklab/pipeline/world"
)

// Recorded runs over forklab-agent/1 (docs/agent-protocol.md, "runs and
// load", "inspect"): an agent that declares the runs capability lists the
// runs it holds (a LangGraph checkpointer's threads) with runs, and hands
// each back with load as start hands back a seed's run; one that declares
// inspect computes the features and hidden truth of a checkpoint it is
// given (a record in a file without them).
const (
	MethodRuns    = "runs"
	MethodLoad    = "load"
	MethodInspect = "inspect"
)

// RunsParams are runs' params: the page of the agent's runs from cursor
// (nil: the first), at most limit of them.
type RunsParams struct {
	Cursor *string `json:"cursor"`
	Limit  int     `json:"limit"`
}

// WireRun is one run of runs' result.
type WireRun struct {
	RunID    *string         `json:"run_id"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// RunsResult is runs' result: a page of runs and the cursor of the next
// page, null after the last (the key is required).
type RunsResult struct {
	Runs       []WireRun       `json:"runs"`
	NextCursor json.RawMessage `json:"next_cursor"`
}

func (r *RunsResult) check(where string) error {
	if r.Runs == nil {
		return missing(where, "runs")
	}
	if r.NextCursor == nil {
		return missing(where, "next_cursor")
	}
	for i, run := range r.Runs {
		if run.RunID == nil {
			return missing(fmt.Sprintf("%s.runs[%d]", where, i), "run_id")
		}
		if *run.RunID == "" {
			return fmt.Errorf("%s.runs[%d].run_id must be non-empty text", where, i)
		}
	}
	if s := string(bytes.TrimSpace(r.NextCursor)); s != "null" && (len(s) < 3 || s[0] != '"') {
		return fmt.Errorf("%s.next_cursor must be a non-empty string or null, got %s", where, s)
	}
	return nil
}

// LoadParams are load's params: one of the runs runs listed, to hand back
// as start hands back a seed's run (its task, and its checkpoint at each
// fork step) with the configuration's parameters.
type LoadParams struct {
	RunID     string       `json:"run_id"`
	ForkSteps []int        `json:"fork_steps"`
	Params    world.Params `json:"params"`
}

// InspectParams are inspect's params: a checkpoint the agent made (a
// record of a file), and the fork step the record says it was taken at
// (nil when it does not say).
type InspectParams struct {
	Checkpoint json.RawMessage `json:"checkpoint"`
	ForkStep   *int            `json:"fork_step"`
}

// InspectResult is inspect's result: what the checkpoint is, computed from
// it — over, features, hidden truth, the cost of reaching it.
type InspectResult struct {
	Over     *bool  `json:"over"`
	Features Values `json:"features"`
	Hidden   Values `json:"hidden"`
	Cost     *Cost  `json:"cost"`
}

func (r *InspectResult) check(where string) error {
	switch {
	case r.Over == nil:
		return missing(where, "over")
	case r.Features == nil:
		return missing(where, "features")
	case r.Hidden == nil:
		return missing(where, "hidden")
	case r.Cost == nil:
		return missing(where, "cost")
	}
	return r.Cost.check(where + ".cost")
}

var _ population.Lister = (*Definition)(nil)

// Inspects says whether the agent declares inspect: it computes a
// checkpoint's features, so a recorded run's record need not carry them.
func (d *Definition) Inspects() bool { return d.init.Capabilities.Inspect }

// ListRuns asks the agent's runs for one page of its runs (population.Lister).
func (d *Definition) ListRuns(ctx context.Context, cursor string, limit int) ([]population.Run, string, error) {
	if !d.init.Capabilities.Runs {
		return nil, "", fmt.Errorf("agent world %s does not declare the runs capability", d.init.World.Name)
	}
	p := RunsParams{Limit: limit}
	if cursor != "" {
		p.Cursor = &cursor
	}
	var out []population.Run
	var next string
	c := &call{method: MethodRuns, units: 1, params: p, decode: func(raw json.RawMessage) error {
		var r RunsResult
		if err := decodeResult("runs.result", raw, &r); err != nil {
			return err
		}
		if len(r.Runs) > limit {
			return fmt.Errorf("result.runs has %d entries for a limit of %d", len(r.Runs), limit)
		}
		out, next = out[:0], ""
		for _, run := range r.Runs {
			out = append(out, population.Run{RunID: *run.RunID, Metadata: bytes.Clone(run.Metadata)})
		}
		if s := bytes.TrimSpace(r.NextCursor); string(s) != "null" {
			json.Unmarshal(s, &next)
		}
		return nil
	}}
	if err := d.pool.do(ctx, []*call{c}); err != nil {
		return nil, "", err
	}
	if c.err != nil {
		return nil, "", c.err
	}
	return out, next, nil
}

// loadCall is the load request of runID, decoding into res as a start
// reply is.
func (i *Instance) loadCall(runID string, forkSteps []int, res *lab.SeedResult) *call {
	return &call{method: MethodLoad, units: 1,
		params: LoadParams{RunID: runID, ForkSteps: forkSteps, Params: i.params},
		decode: i.decodeRun("load.result", forkSteps, res)}
}

// inspectCall is the inspect request of a checkpoint taken at forkStep,
// decoding into f.
func (i *Instance) inspectCall(checkpoint []byte, forkStep int, f *lab.ForkResult) *call {
	d := &i.def.init.World
	return &call{method: MethodInspect, units: 1,
		params: InspectParams{Checkpoint: checkpoint, ForkStep: &forkStep},
		decode: func(raw json.RawMessage) error {
			var r InspectResult
			if err := decodeResult("inspect.result", raw, &r); err != nil {
				return err
			}
			var err error
			f.Over = *r.Over
			if f.Features, err = parseValues("result.features", d.Features, r.Features, f.Features[:0]); err != nil {
				return err
			}
			if f.Hidden, err = parseValues("result.hidden", d.Hidden, r.Hidden, f.Hidden[:0]); err != nil {
				return err
			}
			f.Cost, err = parseCost("result.cost", d.Cost, r.Cost)
			return err
		}}
}

// Recorded returns the record runner of plan (lab.Recorder): runs the
// agent lists are loaded (load); a record's checkpoints are inspected when
// the agent declares inspect (the record's features and hidden truth then
// compared with the agent's: a difference is an error row), or taken with
// the record's own features otherwise; then every checkpoint is branched
// as a seed's is, with the run's seed — or, for a run without one, its
// lab.RunKey — keying the branches' noise. A checkpoint the agent refuses
// (-32001 or -32602, in inspect or branch) is a *lab.RecordError: bad
// input; the agent's other failures are error rows. The journal of a
// seed's sweep is not kept for recorded runs: a unit interrupted half-way
// asks the agent again for its runs.
func (i *Instance) Recorded(plan lab.Plan) (lab.RecordRunner, error) {
	if err := lab.CheckPlan(i.def.init.World, plan); err != nil {
		return nil, err
	}
	return &agentRecords{inst: i, plan: plan}, nil
}

// agentRecords forks recorded runs through the agent's pool.
type agentRecords struct {
	inst *Instance
	plan lab.Plan
}

// Costly says every run costs the agent real work: the sweep writes the
// units buffered, once.
func (r *agentRecords) Costly() bool { return true }

// RunRecords forks the records next yields, blocks of them at once (as
// many blocks in flight as twice the pool's processes), and emits them in
// order.
func (r *agentRecords) RunRecords(ctx context.Context, next lab.Records, emit func(*lab.SeedResult) error) error {
	def := r.inst.def
	size := def.blockSize()
	inner, cancel := def.failFastContext(ctx)
	defer cancel()
	window := make(chan struct{}, 2*def.pool.cfg.Parallel)
	blocks := make(chan *block, cap(window)+1)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(blocks)
		for end := false; !end; {
			var n uint64
			select {
			case window <- struct{}{}:
				n = def.admit(inner, uint64(size))
			case <-inner.Done():
			}
			if n == 0 {
				b := &block{skipped: true, done: make(chan struct{})}
				close(b.done)
				blocks <- b
				return
			}
			b := &block{done: make(chan struct{})}
			for uint64(len(b.recs)) < n {
				rec, err := next(inner)
				if err != nil {
					b.err = err
					break
				}
				if rec == nil {
					end = true
					break
				}
				b.recs = append(b.recs, rec.Clone())
			}
			if len(b.recs) == 0 || b.err != nil {
				def.release(n, world.Cost{})
				close(b.done)
				blocks <- b
				if b.err != nil {
					return
				}
				continue
			}
			wg.Add(1)
			go func(b *block) {
				defer wg.Done()
				defer close(b.done)
				if err := r.play(inner, b); err != nil {
					b.err = err
				}
				def.release(n, b.dearest)
			}(b)
			blocks <- b
		}
	}()
	return def.emitBlocks(ctx, blocks, window, cancel, &wg, emit)
}

// play fills b.results: loads, inspects and branches, the agent's pool
// serving them.
func (r *agentRecords) play(ctx context.Context, b *block) error {
	i := r.inst
	d := &i.def.init.World
	b.results = make([]*lab.SeedResult, len(b.recs))
	var first []*call // load and inspect
	type inspected struct {
		rec *lab.Record
		rf  *lab.RecordFork
		f   *lab.ForkResult
		c   *call
	}
	var checks []inspected
	loads := make([]*call, len(b.recs))
	for k, rec := range b.recs {
		res := &lab.SeedResult{}
		res.Resize(d, r.plan)
		b.results[k] = res
		res.RunID = rec.RunID
		res.Metadata = append(res.Metadata, rec.Metadata...)
		if rec.Seed != nil {
			res.Seed = *rec.Seed
		} else {
			res.Seed, res.NoSeed = lab.RunKey(rec.RunID), true
		}
		if len(rec.Forks) == 0 {
			loads[k] = i.loadCall(rec.RunID, r.plan.ForkSteps, res)
			first = append(first, loads[k])
			continue
		}
		if err := r.fromRecord(rec, res); err != nil {
			return err
		}
		if !i.def.init.Capabilities.Inspect {
			continue
		}
		for fi := range res.Forks {
			f := &res.Forks[fi]
			if f.Absent || f.Err != "" {
				continue
			}
			rf := &rec.Forks[slices.IndexFunc(rec.Forks, func(x lab.RecordFork) bool { return x.ForkStep == f.ForkStep })]
			c := i.inspectCall(f.Checkpoint, f.ForkStep, f)
			checks = append(checks, inspected{rec, rf, f, c})
			first = append(first, c)
		}
	}
	if len(first) > 0 {
		if err := i.def.pool.do(ctx, first); err != nil {
			return err
		}
	}
	for k, c := range loads {
		if c != nil && c.err != nil {
			b.results[k] = &lab.SeedResult{Seed: b.results[k].Seed, NoSeed: b.results[k].NoSeed, RunID: b.recs[k].RunID,
				Metadata: b.results[k].Metadata, Err: "load: " + errText(c.err)}
		}
	}
	for _, x := range checks {
		if x.c.err != nil {
			if Refused(x.c.err) || BadCheckpoint(x.c.err) {
				return &lab.RecordError{Where: x.rec.Where, Err: fmt.Errorf("agent world %s refuses its checkpoint: %s", d.Name, errText(x.c.err))}
			}
			x.f.Err = "inspect: " + errText(x.c.err)
			continue
		}
		if msg, err := lab.Disagreement(x.rec.Where, d, "agent world "+d.Name+"'s inspect computes from its checkpoint", "from inspect", x.rf, x.f); err != nil {
			return err
		} else if msg != "" {
			x.f.Err = msg
		}
	}
	K := r.plan.Replicas
	var branches []*call
	type at struct{ k, fi int }
	var where []at
	for k, res := range b.results {
		if res.Err != "" {
			continue
		}
		for fi := range res.Forks {
			f := &res.Forks[fi]
			if f.Absent || f.Err != "" {
				continue
			}
			if r.plan.Fires != nil {
				f.Fires = r.plan.Fires(f.Features)
			}
			branches = append(branches, i.branchCallRun(res.Seed, url.PathEscape(res.RunID), f.ForkStep, f.Over, f.Checkpoint, r.plan.Arms, K, f.Fires, f.Branches, 0, r.plan.SweepID))
			where = append(where, at{k, fi})
		}
	}
	if len(branches) > 0 {
		if err := i.def.pool.do(ctx, branches); err != nil {
			return err
		}
	}
	spent := make([]world.Cost, len(b.results))
	for n, c := range branches {
		res := b.results[where[n].k]
		f := &res.Forks[where[n].fi]
		if c.err != nil {
			if len(b.recs[where[n].k].Forks) > 0 && (Refused(c.err) || BadCheckpoint(c.err)) {
				return &lab.RecordError{Where: b.recs[where[n].k].Where, Err: fmt.Errorf("agent world %s refuses its checkpoint: %s", d.Name, errText(c.err))}
			}
			text := "branch: " + errText(c.err)
			var over *overFault
			blamed := errors.As(c.err, &over) && len(over.Blamed) == len(f.Branches)
			for bi := range f.Branches {
				if !blamed || over.Blamed[bi] {
					f.Branches[bi] = lab.BranchResult{Err: text}
				}
			}
			continue
		}
		for _, br := range f.Branches {
			if br.Err == "" {
				spent[where[n].k] = spent[where[n].k].Add(br.Cost)
			}
		}
	}
	for k, res := range b.results {
		if res.Err == "" && len(res.Forks) > 0 && !res.Forks[len(res.Forks)-1].NoCost {
			spent[k] = spent[k].Add(res.Forks[len(res.Forks)-1].Cost)
		}
		i.def.addSpent(spent[k], false)
		b.dearest = b.dearest.Max(spent[k])
	}
	return nil
}

// fromRecord fills res's forks from a record's checkpoints: a fork step
// the record has no checkpoint at is Absent; the record's features, hidden
// truth, over and cost are read (an agent that declares inspect recomputes
// them, and they are compared).
func (r *agentRecords) fromRecord(rec *lab.Record, res *lab.SeedResult) error {
	d := &r.inst.def.init.World
	for fi := range res.Forks {
		res.Forks[fi].Absent = true
	}
	inspect := r.inst.def.init.Capabilities.Inspect
	for k := range rec.Forks {
		rf := &rec.Forks[k]
		fi := slices.Index(r.plan.ForkSteps, rf.ForkStep)
		if fi < 0 {
			return lab.BadRecord(rec.Where, "its checkpoint is at fork step %d, which this sweep does not fork at", rf.ForkStep)
		}
		f := &res.Forks[fi]
		if !f.Absent {
			return lab.BadRecord(rec.Where, "two checkpoints at fork step %d", rf.ForkStep)
		}
		f.Absent = false
		if rf.Err != "" {
			f.Err = rf.Err
			continue
		}
		var err error
		if f.Checkpoint, err = compactJSON(f.Checkpoint[:0], rf.Checkpoint); err != nil {
			return lab.BadRecord(rec.Where, "checkpoint: %v", err)
		}
		if inspect {
			continue
		}
		if rf.Features == nil {
			return lab.BadRecord(rec.Where, "no features, and agent world %s does not declare inspect to compute them", d.Name)
		}
		if f.Features, err = lab.ParseObject("features", d.Features, rf.Features, f.Features[:0]); err != nil {
			return &lab.RecordError{Where: rec.Where, Err: err}
		}
		if rf.Hidden != nil {
			if f.Hidden, err = lab.ParseObject("hidden", d.Hidden, rf.Hidden, f.Hidden[:0]); err != nil {
				return &lab.RecordError{Where: rec.Where, Err: err}
			}
		} else {
			for range d.Hidden {
				f.Hidden = append(f.Hidden, world.NullValue())
			}
		}
		if rf.Over != nil {
			f.Over = *rf.Over
		}
		if rf.Cost == nil {
			f.NoCost = true
		} else {
			var c Cost
			if err := decodeStrictJSON(rf.Cost, &c); err != nil {
				return lab.BadRecord(rec.Where, "cost: %v", err)
			}
			if f.Cost, err = parseCost("cost", d.Cost, &c); err != nil {
				return &lab.RecordError{Where: rec.Where, Err: err}
			}
		}
	}
	return nil
}

// decodeStrictJSON decodes b into v, numbers kept exact, unknown keys
// refused.
func decodeStrictJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	d.DisallowUnknownFields()
	return d.Decode(v)
}
