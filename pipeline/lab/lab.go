// Package lab is the fork lab's engine room: what a sweep asks of a world,
// whoever plays it.
//
// A sweep plays each seed of a configuration to each fork step, takes a
// checkpoint, forks it into arms and replicas, and finishes every branch.
// Runner is that work for a block of seeds, seed after seed, reported
// through a reused SeedResult. Three kinds of runner exist: the generic
// in-process one over any world.World (Builtin), a world's own faster one
// (the counter's), and an external agent's over the forklab-agent/1
// protocol. All of them fill the same SeedResult, so the sweep, its Parquet
// tables and everything downstream never know which ran.
//
// Definition is a world as the registry knows it: its declaration, and a
// way to open it with parameters and a model. Built-in worlds register
// themselves (Register) from their package's init; the CLI imports them.
package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
)

// Plan says what a runner does with every seed: fork it at ForkSteps, into
// Arms (the control off first), Replicas times each.
type Plan struct {
	ForkSteps []int
	// Arms lists the arms, off first, then the treatment arms in the
	// spec's order.
	Arms     []fork.Arm
	Replicas int
	// Fires is the policy arm's guard rule over a checkpoint's features
	// (declaration order); nil when the plan has no policy arm.
	Fires func(features []world.Value) bool
	// Transcripts asks a built-in world's runner for every branch's
	// transcript (BranchResult.Transcript; transcript.go). An external
	// agent's runner keeps the transcripts the agent sends, asked or not.
	Transcripts bool

	// SweepID is the sweep's id (its manifest's sweep_id), which an
	// external agent is told with every branch (docs/agent-protocol.md,
	// "branch"); "" outside a sweep. It never changes what is computed.
	SweepID string
}

// Branches is the number of branches per fork: arms × replicas.
func (p Plan) Branches() int { return len(p.Arms) * p.Replicas }

// SeedResult is what a runner reports for one seed. Slices and byte slices
// in it are reused for the next seed once the emit callback returns.
type SeedResult struct {
	Seed uint64
	// Err is set when the task could not be started at all: the seed's
	// rows are error rows. Forks is then empty.
	Err string
	// Task is the seed's task draws, in declaration order.
	Task []world.Value
	// Forks has one entry per plan fork step, in order.
	Forks []ForkResult

	// A recorded run's (RecordRunner): RunID is its id ("" for a seed's
	// run, whose id is its decimal seed); NoSeed says it has no seed (Seed
	// is then its RunKey, and the seed column NULL); Metadata is what its
	// source says about it, as JSON (nil: nothing).
	RunID    string
	NoSeed   bool
	Metadata []byte
}

// ForkResult is one checkpoint of a seed and its branches.
type ForkResult struct {
	ForkStep int
	// Err is set when the run to the fork failed: the checkpoint, its
	// branches and pairs are error rows.
	Err string
	// Over: the run had ended before reaching the fork step.
	Over bool
	// Checkpoint is the checkpoint's JSON.
	Checkpoint []byte
	// Features and Hidden are the checkpoint's features and hidden truths
	// in declaration order.
	Features, Hidden []world.Value
	// Cost is what reaching the fork cost.
	Cost world.Cost
	// Fires is the policy rule's verdict on Features (false without one).
	Fires bool
	// Branches has Plan.Branches entries, arm-major in Plan.Arms order:
	// branch r of arm i is Branches[i*Replicas+r].
	Branches []BranchResult
	// Absent: a recorded run has no checkpoint at this fork step, and so
	// no rows there. NoCost: what reaching the fork cost is unknown (a
	// recorded run that does not say): the cost columns are NULL.
	Absent, NoCost bool
	// scores backs the Score of Branches (SetScore), reused from seed to
	// seed so that a scored world's runner allocates nothing per branch.
	scores []float64
}

// SetScore sets branch j's score to x, in storage the ForkResult keeps
// from seed to seed.
func (f *ForkResult) SetScore(j int, x float64) {
	if len(f.scores) < len(f.Branches) {
		f.scores = make([]float64, len(f.Branches))
	}
	f.scores[j] = x
	f.Branches[j].Score = &f.scores[j]
}

// BranchResult is one finished branch.
type BranchResult struct {
	// Err is set when the branch failed; the other fields are then
	// meaningless.
	Err        string `json:"error,omitempty"`
	Intervened bool   `json:"intervened"`
	Success    bool   `json:"success"`
	// Score is the branch's graded outcome when the world declares one
	// (world.ScoreSpec), within its range; nil for a pass/fail world. A
	// runner may point it into its own storage (ForkResult.SetScore).
	Score *float64 `json:"score,omitempty"`
	// Cost is what the branch cost from the fork to its end, the
	// intervention included.
	Cost world.Cost `json:"cost"`
	// Details is optional outcome JSON an agent reports (nil for built-in
	// worlds).
	Details json.RawMessage `json:"details,omitempty"`
	// Transcript is what the branch did after the fork, step by step: a
	// JSON array of step objects (transcript.go), compact; nil when the
	// plan did not ask a built-in world for it, or an agent sent none.
	Transcript json.RawMessage `json:"transcript,omitempty"`
}

// Outcome is one branch finished from a checkpoint (forklab fork).
type Outcome struct {
	Seed     uint64 `json:"seed"`
	ForkStep int    `json:"fork_step"`
	BranchResult
	// Final is what the agent sees at the branch's end (the world's
	// Observe), as JSON.
	Final json.RawMessage `json:"final,omitempty"`
}

// Runner plays the seeds of one configuration under one plan.
type Runner interface {
	// Run plays seeds [lo, hi) and calls emit once per seed, in seed
	// order, with that seed's results; the SeedResult is reused once emit
	// returns. Errors of single seeds, forks or branches are reported in
	// the results, not returned: Run returns an error only when it cannot
	// go on (ctx cancelled, emit failed, the runner broke down).
	Run(ctx context.Context, lo, hi uint64, emit func(*SeedResult) error) error
}

// Instance is a world opened with one configuration's parameters and
// model.
type Instance interface {
	// Declaration is the world's declaration.
	Declaration() world.Declaration
	// Runner returns a runner of plan. A runner is used by one goroutine
	// at a time; a sweep makes one per worker.
	Runner(plan Plan) (Runner, error)
	// Checkpoint plays seed's run to forkStep and returns the checkpoint's
	// JSON (forklab checkpoint).
	Checkpoint(seed uint64, forkStep int) (ForkResult, error)
	// Branch decodes a checkpoint of this world, verifies it by replaying
	// its seed, and finishes one branch of it (forklab fork). rule is the
	// policy arm's guard rule (nil for other arms). The error wraps
	// fork.ErrCheckpoint for a checkpoint that is malformed, of another
	// world or version, or edited.
	Branch(checkpoint []byte, arm fork.Arm, replica int, rule func([]world.Value) bool) (Outcome, error)
	// Start begins seed's run, to be played turn by turn (sessions on
	// the log fold their events through it).
	Start(seed uint64) Play
	// Intervention returns the action arm applies at a fork, and false
	// when it applies none; fires is the guard rule's verdict, read only by
	// the policy arm.
	Intervention(arm fork.Arm, fires bool) (world.Action, bool)
	// MaxSteps is the most steps any run of this configuration can take
	// (a fork step beyond it is never reached), or 0 when unknown.
	MaxSteps() int
	// Close releases what the instance holds (agent processes).
	Close() error
}

// Replayer is an Instance that plays one branch of a checkpoint again and
// records its transcript: every built-in world (its branches are
// deterministic). forklab show replays the branches a sweep kept no
// transcript of.
type Replayer interface {
	// Replay is Branch with the outcome's Transcript filled.
	Replay(checkpoint []byte, arm fork.Arm, replica int, rule func([]world.Value) bool) (Outcome, error)
}

// Play is one run of a world played turn by turn: what a session on the
// log replays and continues. Its methods follow world.World's on the run's
// own state.
type Play interface {
	Seed() uint64
	Over() bool
	Steps() int
	// Choose is the model's action for the next turn, with noise stream
	// key (fork.PrefixKey before a fork, fork.Key in a branch).
	Choose(key uint64) world.Action
	// Step applies one action.
	Step(a world.Action)
	Success() bool
	// Score is the run's graded outcome, and whether the world reports
	// one (world.Scorer).
	Score() (float64, bool)
	// Observe is what the agent sees now, as a JSON-ready value.
	Observe() any
	// Task, Features and Hidden append the run's task draws, features
	// and hidden truths to dst, in declaration order (a sweep played on
	// the session log reads a checkpoint's row off the fold's Play).
	Task(dst []world.Value) []world.Value
	Features(dst []world.Value) []world.Value
	Hidden(dst []world.Value) []world.Value
	Cost() world.Cost
	// Clone returns an independent copy (a fork).
	Clone() Play
	// Checkpoint encodes the run as a checkpoint at forkStep, with the
	// actions taken so far.
	Checkpoint(forkStep int, hist []world.Action) ([]byte, error)
}

// Definition is a world as the registry holds it.
type Definition interface {
	// Declaration is the world's declaration.
	Declaration() world.Declaration
	// Open returns the world with resolved parameters (Declaration.Resolve)
	// and a model.
	Open(params world.Params, model fork.Model) (Instance, error)
}

var (
	registryMu sync.RWMutex
	registry   = map[string]Definition{}
)

// Register adds a world to the registry under its declaration's name. It
// panics on an invalid declaration or a name registered twice: both are
// programming errors of a world package.
func Register(d Definition) {
	decl := d.Declaration()
	if err := decl.Validate(); err != nil {
		panic(fmt.Sprintf("lab.Register: %v", err))
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[decl.Name]; dup {
		panic(fmt.Sprintf("lab.Register: world %q registered twice", decl.Name))
	}
	registry[decl.Name] = d
}

// Unregister removes a world; tests that register a world of their own use
// it to clean up.
func Unregister(name string) {
	registryMu.Lock()
	defer registryMu.Unlock()
	delete(registry, name)
}

// Lookup returns the registered world named name. The error wraps
// world.ErrUnknownWorld and names the known worlds.
func Lookup(name string) (Definition, error) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	if d, ok := registry[name]; ok {
		return d, nil
	}
	return nil, fmt.Errorf("%w %q (known: %s)", world.ErrUnknownWorld, name, strings.Join(namesLocked(), ", "))
}

// Names lists the registered worlds, sorted, counter first.
func Names() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	return namesLocked()
}

func namesLocked() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if (names[i] == "counter") != (names[j] == "counter") {
			return names[i] == "counter"
		}
		return names[i] < names[j]
	})
	return names
}

// Definitions returns every registered world's definition, in Names order.
func Definitions() []Definition {
	var out []Definition
	for _, n := range Names() {
		d, _ := Lookup(n)
		out = append(out, d)
	}
	return out
}

// CheckPlan reports a plan the world cannot play: an arm without the
// intervention it needs, or a policy arm without a rule.
func CheckPlan(d world.Declaration, p Plan) error {
	if len(p.Arms) == 0 || p.Arms[0] != fork.Off {
		return fmt.Errorf("the plan must list the control off first")
	}
	for _, a := range p.Arms {
		if !slices.Contains(d.Arms(), string(a)) {
			return fmt.Errorf("world %s declares no intervention for arm %s (its arms: %s)", d.Name, a, strings.Join(d.Arms(), ", "))
		}
		if a == fork.Policy && p.Fires == nil {
			return fmt.Errorf("the policy arm needs a guard rule (--policy FILE)")
		}
	}
	if p.Replicas < 1 {
		return fmt.Errorf("replicas must be at least 1")
	}
	return nil
}

// Resize makes r's slices fit plan and declaration d: Task, Forks, and per
// fork Features, Hidden and Branches, reusing their storage.
func (r *SeedResult) Resize(d *world.Declaration, plan Plan) {
	r.Err = ""
	r.Task = r.Task[:0]
	r.RunID, r.NoSeed, r.Metadata = "", false, r.Metadata[:0]
	if cap(r.Forks) < len(plan.ForkSteps) {
		r.Forks = make([]ForkResult, len(plan.ForkSteps))
	}
	r.Forks = r.Forks[:len(plan.ForkSteps)]
	n := plan.Branches()
	for i := range r.Forks {
		f := &r.Forks[i]
		f.ForkStep, f.Err, f.Over, f.Fires, f.Cost = plan.ForkSteps[i], "", false, false, world.Cost{}
		f.Checkpoint, f.Features, f.Hidden = f.Checkpoint[:0], f.Features[:0], f.Hidden[:0]
		f.Absent, f.NoCost = false, false
		if cap(f.Branches) < n {
			f.Branches = make([]BranchResult, n)
		}
		f.Branches = f.Branches[:n]
		for j := range f.Branches {
			b := &f.Branches[j]
			*b = BranchResult{Details: b.Details[:0], Transcript: b.Transcript[:0]}
		}
	}
}
