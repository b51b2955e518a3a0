package agentproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
)

// ErrStopped is returned by a runner that stopped taking new seeds because
// Definition.Stop was called (the sweep's --max-cost was reached). The
// seeds it had started were finished and kept in the journal.
var ErrStopped = errors.New("stopped: the cost budget is reached")

// Definition is an external agent as the lab sees it: a lab.Definition
// whose declaration is the agent's own, and whose runners send the work to
// a pool of agent processes. One pool serves every configuration.
type Definition struct {
	pool *Pool
	init InitializeResult

	mu        sync.Mutex
	journal   string
	journaled world.Cost // what the journal's seeds cost, when it was set
	spent     world.Cost // reported by the agent in this process
	replayed  world.Cost // of seeds taken from the journal
	stopped   atomic.Bool

	// The budget (budget.go).
	limit    map[string]float64
	kept     world.Cost    // of units kept from an interrupted sweep
	reached  string        // the limit that stopped the definition
	inflight uint64        // seeds admitted and not yet played
	dearest  world.Cost    // the most one seed has cost, by field
	wake     chan struct{} // closed when admit's waiters should look again
}

var _ lab.Definition = (*Definition)(nil)

// Open starts the agent's first process and learns its declaration from
// its initialize; the process stays, the first of the pool's
// cfg.Parallel, which starts the others as work arrives (every process
// must declare the same: one that does not stops the work with
// ErrInconsistent). Its standard error goes to forklab's until SetLogDir.
// The error says why the agent could not be used: it did not start, did
// not answer initialize in time, spoke another protocol version, or sent a
// declaration that is malformed or breaks a rule (naming the field).
func Open(ctx context.Context, cfg Config) (*Definition, error) {
	p := newPool(cfg)
	<-p.idle
	s := p.take() // slot 1: no process runs yet
	err := p.ensure(ctx, s)
	p.put(s)
	var sf startFailure
	if errors.As(err, &sf) && cfg.FailFast != nil {
		// The agent failed before it said what it is: it crashed on
		// import, wrote something else first, or hung.
		err = &FailingError{Rule: "its first process failed before it declared its world", Last: errText(sf.error), Failed: 1, Attempts: 1, last: sf.error}
	}
	if err != nil {
		return nil, fmt.Errorf("agent %q: %w", cfg.Command.Line, err)
	}
	return &Definition{pool: p, init: *p.init}, nil
}

// Declaration returns the agent's world declaration.
func (d *Definition) Declaration() world.Declaration { return d.init.World }

// Capabilities returns what the agent declared it implements.
func (d *Definition) Capabilities() Capabilities { return d.init.Capabilities }

// Agent returns the agent's name and version, if it gave them.
func (d *Definition) Agent() *AgentInfo { return d.init.Agent }

// Pool returns the definition's process pool.
func (d *Definition) Pool() *Pool { return d.pool }

// SetLogDir sends the standard error of the agent's processes to
// dir/agent-N.log from now on: those running and those started later.
func (d *Definition) SetLogDir(dir string) { d.pool.SetLogDir(dir) }

// SetJournal keeps every seed an agent finished without error in files
// under dir, and replays seeds found there instead of asking the agent
// again: an interrupted sweep resumed over the same dir pays for no seed
// twice. "" turns the journal off. It reads what the seeds already in dir
// cost (Journaled).
func (d *Definition) SetJournal(dir string) {
	var cost world.Cost
	if dir != "" {
		cost, _ = journalCost(dir) // an unreadable journal shows when it is opened
	}
	d.mu.Lock()
	d.journal, d.journaled = dir, cost
	d.mu.Unlock()
}

// Journaled returns what the seeds in the journal cost when the agent
// played them, as SetJournal found them: the cost of every seed finished
// without error in earlier runs of the sweep, whether this run replays it
// or keeps its unit as written. Journaled plus Spent's spent is the cost
// of the sweep so far; it does not depend on the order in which seeds are
// replayed, so a resumed sweep that asks nothing new reports the same
// figure every time.
func (d *Definition) Journaled() world.Cost {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.journaled
}

// Stop makes runners take no new seeds: those in progress are finished
// and journaled, then Run returns ErrStopped. SetBudget stops the
// definition by itself once the budget is reached.
func (d *Definition) Stop() {
	d.stopped.Store(true)
	d.wakeAll()
}

// Spent returns what the agent reported its work in this process cost
// (runs to the forks and branches), and what the seeds replayed from the
// journal had cost when they were played.
func (d *Definition) Spent() (spent, replayed world.Cost) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.spent, d.replayed
}

func (d *Definition) addSpent(c world.Cost, replayed bool) {
	d.mu.Lock()
	if replayed {
		d.replayed = d.replayed.Add(c)
	} else {
		d.spent = d.spent.Add(c)
	}
	d.mu.Unlock()
}

// Close shuts the agent processes down.
func (d *Definition) Close() error { return d.pool.Close() }

// Failing returns the *FailingError that stopped the agent's work
// (Config.FailFast), or nil while it has not stopped.
func (d *Definition) Failing() error { return d.pool.brk.failure() }

// Open returns the agent with one configuration's parameters (resolved
// against its declaration) and model.
func (d *Definition) Open(params world.Params, model fork.Model) (lab.Instance, error) {
	if err := model.Validate(); err != nil {
		return nil, err
	}
	return &Instance{def: d, params: params, model: model}, nil
}

// Instance is an agent opened with one configuration.
type Instance struct {
	def    *Definition
	params world.Params
	model  fork.Model
}

var _ lab.Instance = (*Instance)(nil)

// Declaration returns the agent's declaration.
func (i *Instance) Declaration() world.Declaration { return i.def.init.World }

// MaxSteps is unknown for an agent: 0.
func (i *Instance) MaxSteps() int { return 0 }

// Close does nothing: the processes belong to the Definition.
func (i *Instance) Close() error { return nil }

// Start returns nil: an external agent plays its own sessions and writes
// their events itself (docs/agent-protocol.md, "Sessions on the log");
// forklab forks them through fold.
func (i *Instance) Start(seed uint64) lab.Play { return nil }

// Intervention returns the declared action arm applies at a fork, if the
// declaration lists actions.
func (i *Instance) Intervention(arm fork.Arm, fires bool) (world.Action, bool) {
	name, ok := i.interventionName(arm, fires)
	if !ok {
		return 0, false
	}
	d := i.def.init.World
	return d.Action(name)
}

// interventionName is the action arm applies at a fork, by name.
func (i *Instance) interventionName(arm fork.Arm, fires bool) (string, bool) {
	d := i.def.init.World
	switch arm {
	case fork.On, fork.Placebo:
		iv, ok := d.Intervention(string(arm))
		return iv.Action, ok
	case fork.Policy:
		iv, ok := d.Intervention(string(fork.On))
		return iv.Action, ok && fires
	}
	return "", false
}

// Checkpoint asks the agent to play seed's run to forkStep.
func (i *Instance) Checkpoint(seed uint64, forkStep int) (lab.ForkResult, error) {
	var res lab.SeedResult
	plan := lab.Plan{ForkSteps: []int{forkStep}, Arms: []fork.Arm{fork.Off}, Replicas: 1}
	res.Resize(&i.def.init.World, plan)
	c := i.startCall(seed, plan.ForkSteps, &res)
	if err := i.def.pool.do(context.Background(), []*call{c}); err != nil {
		return lab.ForkResult{}, err
	}
	if c.err != nil {
		return lab.ForkResult{}, c.err
	}
	return res.Forks[0], nil
}

// Branch asks the agent to finish one branch of checkpoint. The policy
// arm needs the checkpoint's features, which an agent's checkpoint does
// not carry in a form forklab reads: it is refused here (fork it from the
// session log, whose fold gives them).
func (i *Instance) Branch(checkpoint []byte, arm fork.Arm, replica int, rule func([]world.Value) bool) (lab.Outcome, error) {
	if arm == fork.Policy {
		return lab.Outcome{}, fmt.Errorf("the policy arm needs the checkpoint's features: fork an agent's run from the session log (forklab fork --stream … --agent …), whose fold reports them")
	}
	return i.BranchAt(context.Background(), 0, 0, false, checkpoint, arm, replica, false)
}

// BranchAt asks the agent to finish one branch of checkpoint, taken of
// seed at forkStep; over says the run was over there, fires is the policy
// rule's verdict on its features.
func (i *Instance) BranchAt(ctx context.Context, seed uint64, forkStep int, over bool, checkpoint []byte, arm fork.Arm, replica int, fires bool) (lab.Outcome, error) {
	if !json.Valid(checkpoint) {
		return lab.Outcome{}, fmt.Errorf("%w: the checkpoint is not JSON", fork.ErrCheckpoint)
	}
	if !armSupported(i.def.init.World, arm) {
		d := i.def.init.World
		return lab.Outcome{}, fmt.Errorf("agent world %s declares no intervention for arm %s (its arms: %v)", d.Name, arm, d.Arms())
	}
	out := make([]lab.BranchResult, 1)
	c := i.branchCall(seed, forkStep, over, checkpoint, []fork.Arm{arm}, 1, fires, out, replica, "")
	if err := i.def.pool.do(ctx, []*call{c}); err != nil {
		return lab.Outcome{}, err
	}
	if c.err != nil {
		return lab.Outcome{}, c.err
	}
	if out[0].Err != "" {
		return lab.Outcome{}, errors.New(out[0].Err)
	}
	return lab.Outcome{Seed: seed, ForkStep: forkStep, BranchResult: out[0]}, nil
}

func armSupported(d world.Declaration, arm fork.Arm) bool {
	for _, a := range d.Arms() {
		if a == string(arm) {
			return true
		}
	}
	return false
}

// startCall is the start request of seed, decoding into res.
func (i *Instance) startCall(seed uint64, forkSteps []int, res *lab.SeedResult) *call {
	return &call{method: MethodStart, units: 1,
		params: StartParams{Seed: seed, ForkSteps: forkSteps, Params: i.params, Model: i.model},
		decode: i.decodeRun("start.result", forkSteps, res)}
}

// decodeRun decodes a start result (or a load result, of the same shape:
// schema names which) of forkSteps into res.
func (i *Instance) decodeRun(schema string, forkSteps []int, res *lab.SeedResult) func(json.RawMessage) error {
	d := &i.def.init.World
	return func(raw json.RawMessage) error {
		var r StartResult
		if err := decodeResult(schema, raw, &r); err != nil {
			return err
		}
		if len(r.Forks) != len(forkSteps) {
			return fmt.Errorf("result.forks has %d entries for %d fork steps asked", len(r.Forks), len(forkSteps))
		}
		var err error
		if res.Task, err = parseValues("result.task", d.Task, r.Task, res.Task[:0]); err != nil {
			return err
		}
		for k := range r.Forks {
			where := fmt.Sprintf("result.forks[%d]", k)
			if *r.Forks[k].ForkStep != forkSteps[k] {
				return fmt.Errorf("%s.fork_step is %d, but fork step %d was asked there", where, *r.Forks[k].ForkStep, forkSteps[k])
			}
			if err := parseFork(where, d, &r.Forks[k], &res.Forks[k]); err != nil {
				return err
			}
		}
		return nil
	}
}

// branchCall is the branch request of every arm and replica of one
// checkpoint, decoding into out (arm-major). With replicas 1, firstReplica
// numbers the only replica. over is what start (or fold) said of the
// checkpoint: a run that is over has one outcome, which every branch of it
// must report (docs/agent-protocol.md, "Runs that are over"). sweepID,
// when not "", is sent with each branch's identity (BranchID), its run the
// decimal seed.
func (i *Instance) branchCall(seed uint64, forkStep int, over bool, checkpoint []byte, arms []fork.Arm, replicas int, fires bool, out []lab.BranchResult, firstReplica int, sweepID string) *call {
	return i.branchCallRun(seed, strconv.FormatUint(seed, 10), forkStep, over, checkpoint, arms, replicas, fires, out, firstReplica, sweepID)
}

// branchCallRun is branchCall for a run named run in its branches'
// identities: a recorded run's percent-encoded run_id (its seed is then
// the one the agent is sent: the run's own, or its run key).
func (i *Instance) branchCallRun(seed uint64, run string, forkStep int, over bool, checkpoint []byte, arms []fork.Arm, replicas int, fires bool, out []lab.BranchResult, firstReplica int, sweepID string) *call {
	d := &i.def.init.World
	specs := make([]BranchSpec, 0, len(arms)*replicas)
	for _, arm := range arms {
		var iv *string
		if name, ok := i.interventionName(arm, fires); ok {
			iv = &name
		}
		for r := range replicas {
			rep := firstReplica + r
			spec := BranchSpec{Arm: arm, Intervention: iv, Replica: rep, NoiseKey: NoiseKey(seed, forkStep, arm, rep, fires)}
			if sweepID != "" {
				spec.BranchID = BranchID(sweepID, run, forkStep, arm, rep)
			}
			specs = append(specs, spec)
		}
	}
	c := &call{method: MethodBranch, units: len(specs),
		params: BranchParams{SweepID: sweepID, Seed: seed, ForkStep: forkStep, Checkpoint: checkpoint, Branches: specs}}
	c.decode = func(raw json.RawMessage) error {
		var r BranchResult
		if err := decodeResult("branch.result", raw, &r); err != nil {
			return err
		}
		if len(r.Branches) != len(specs) {
			return fmt.Errorf("result.branches has %d entries for %d branches asked", len(r.Branches), len(specs))
		}
		failed := 0
		defer func() { c.gaveUp = failed == len(specs) }()
		for k, wb := range r.Branches {
			b := &out[k]
			*b = lab.BranchResult{Details: b.Details[:0], Transcript: b.Transcript[:0]}
			if wb.Error != nil {
				b.Err = fmt.Sprintf("the agent reported the branch failed: %s", wb.Error.Error())
				failed++
				continue
			}
			cost, err := parseCost(fmt.Sprintf("result.branches[%d].cost", k), d.Cost, wb.Cost)
			if err != nil {
				return err
			}
			if b.Success, b.Score, err = parseOutcome(fmt.Sprintf("result.branches[%d]", k), d.Score, wb); err != nil {
				return err
			}
			b.Cost, b.Intervened = cost, specs[k].Intervention != nil
			if len(wb.Details) > 0 && string(wb.Details) != "null" {
				if b.Details, err = compactJSON(b.Details, wb.Details); err != nil {
					return fmt.Errorf("result.branches[%d].details: %v", k, err)
				}
			}
			if len(wb.Transcript) > 0 {
				where := fmt.Sprintf("result.branches[%d].transcript", k)
				if err := transcriptCosts(where, d.Cost, wb.Transcript); err != nil {
					return err
				}
				if b.Transcript, err = compactJSON(b.Transcript, wb.Transcript); err != nil {
					return fmt.Errorf("%s: %v", where, err)
				}
			}
		}
		if over {
			return overAgreement(out[:len(specs)], specs)
		}
		return nil
	}
	return c
}

// overFault is a branch reply of a run that was over at the checkpoint
// whose branches disagree on success: Blamed marks the branches (in the
// request's order) that differ from the first with an outcome, whose
// outcomes are kept; the others are sound.
type overFault struct {
	Blamed []bool
	msg    string
}

func (e *overFault) Error() string { return e.msg }

// overAgreement checks that every branch of a run that was over reports
// the same success, and the same score (docs/agent-protocol.md, "Runs
// that are over"), naming the arm and replica of the first that does not.
// out holds the branches as decoded.
func overAgreement(out []lab.BranchResult, specs []BranchSpec) error {
	first := -1
	var fault *overFault
	for k := range out {
		if out[k].Err != "" {
			continue
		}
		if first < 0 {
			first = k
			continue
		}
		a, b := &out[first], &out[k]
		what, x, y := "success", fmt.Sprint(b.Success), fmt.Sprint(a.Success)
		if a.Success == b.Success {
			if a.Score == nil || b.Score == nil || *a.Score == *b.Score {
				continue
			}
			what, x, y = "score", fmtNum(*b.Score), fmtNum(*a.Score)
		}
		if fault == nil {
			fault = &overFault{Blamed: make([]bool, len(out)),
				msg: fmt.Sprintf("result.branches[%d] (arm %s, replica %d).%s is %s but result.branches[%d] (arm %s, replica %d).%s is %s: the run was over at the checkpoint (start said \"over\": true), so every branch must report its final outcome",
					k, specs[k].Arm, specs[k].Replica, what, x, first, specs[first].Arm, specs[first].Replica, what, y)}
		}
		fault.Blamed[k] = true
	}
	if fault == nil {
		return nil
	}
	return fault
}
