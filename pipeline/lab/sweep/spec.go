package sweep

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/forklab/forklab/internal/floattext"
	"github.com/forklab/forklab/internal/jsondup"
	"github.com/forklab/forklab/internal/plural"
	"github.com/forklab/forklab/pipeline/analysis/gate"
	"github.com/forklab/forklab/pipeline/analysis/policy"
	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/recorded"
	"github.com/forklab/forklab/pipeline/world"
	yaml "go.yaml.in/yaml/v3"
)

// MaxSeed bounds a seed range's END (exclusive) so that every seed fits
// the int64 seed column: the seeds forklab plays are 0 to MaxSeed-1
// (2^63-2), the one range every --help, error and document states.
const MaxSeed = math.MaxInt64

// Range is a half-open range of seeds [Start, End), written "START:END" as
// in Python's range; a lone "N" means "0:N".
type Range struct{ Start, End uint64 }

// Len is the number of seeds in r.
func (r Range) Len() uint64 { return r.End - r.Start }

// String returns "START:END".
func (r Range) String() string { return fmt.Sprintf("%d:%d", r.Start, r.End) }

// ParseRange parses "START:END" or "N": START < END <= MaxSeed (2^63-1), so
// the seeds are integers in [0, 2^63-2].
func ParseRange(s string) (Range, error) {
	lo, hi, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		lo, hi = "0", lo
	}
	start, err1 := strconv.ParseUint(strings.TrimSpace(lo), 10, 63)
	end, err2 := strconv.ParseUint(strings.TrimSpace(hi), 10, 63)
	if err1 != nil || err2 != nil {
		return Range{}, fmt.Errorf("seed range %q is malformed: %s", s, rangeRule)
	}
	if start >= end {
		return Range{}, fmt.Errorf("seed range %q is empty: START must be below END, e.g. 0:300", s)
	}
	return Range{start, end}, nil
}

// rangeRule is what a seed range may be, as every message about one says
// it: END is exclusive, so the last seed that can be played is MaxSeed-1.
var rangeRule = fmt.Sprintf("want START:END with integers 0 <= START < END <= %d (END is exclusive: seeds are integers in [0, %d]), e.g. 0:300", uint64(MaxSeed), uint64(MaxSeed)-1)

// MarshalText implements encoding.TextMarshaler.
func (r Range) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (r *Range) UnmarshalText(b []byte) error {
	v, err := ParseRange(string(b))
	*r = v
	return err
}

// ParseSteps parses fork steps: a comma-separated list of integers and
// inclusive ranges, e.g. "3", "1,2,3" or "1-4". Steps are at least 1; the
// result is sorted (the order steps are listed in means nothing: every
// output orders by fork step). A step listed twice ("3,3", or "1-4,3" where
// a range covers it) is an error naming it, as a repeated arm is
// (fork.ParseArms): a repeat is a typo, not a request, and is never
// dropped without a word.
func ParseSteps(s string) ([]int, error) {
	var steps []int
	seen := map[int64]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		lo, hi, isRange := strings.Cut(f, "-")
		a, err := strconv.ParseInt(strings.TrimSpace(lo), 10, 64)
		b := a
		if err == nil && isRange {
			b, err = strconv.ParseInt(strings.TrimSpace(hi), 10, 64)
		}
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return nil, fmt.Errorf("fork step %s is out of range: steps are integers in [1, %d]", ne.Num, MaxForkStep)
		}
		if err != nil || f == "" {
			return nil, fmt.Errorf("fork steps %q are malformed: want integers in [1, %d] or ranges like 3, 1,2,3 or 1-4", s, MaxForkStep)
		}
		if a < 1 || b < 1 {
			return nil, fmt.Errorf("fork step %d is below 1: the fork must come after at least one step (steps are integers in [1, %d])", min(a, b), MaxForkStep)
		}
		if a > MaxForkStep || b > MaxForkStep {
			return nil, fmt.Errorf("fork step %d is out of range: steps are integers in [1, %d]", max(a, b), MaxForkStep)
		}
		if b < a || b-a > MaxForkSteps {
			return nil, fmt.Errorf("fork step range %q must go upwards and span at most %d steps", f, MaxForkSteps)
		}
		if len(steps)+int(b-a) >= MaxForkSteps {
			return nil, fmt.Errorf("fork steps %q list more than %d steps", s, MaxForkSteps)
		}
		for x := a; x <= b; x++ {
			if seen[x] {
				return nil, fmt.Errorf("fork step %d is listed twice in %q: list each step once (e.g. 3, 1,2,3 or 1-4)", x, s)
			}
			seen[x] = true
			steps = append(steps, int(x))
		}
	}
	slices.Sort(steps)
	return steps, nil
}

// Spec says everything a sweep does; it is stored in the results' manifest
// so that a results directory always says how it was made. It is read from
// flags, or from a JSON or YAML spec file with the same keys.
type Spec struct {
	// World names the world: a built-in one (forklab worlds lists them).
	World string `json:"world"`
	// Seeds is the seed range; zero (and left out) when Runs names the
	// population.
	Seeds Range `json:"seeds,omitzero"`
	// Runs, if set, is the sweep's population instead of a seed range:
	// runs recorded elsewhere (population.go).
	Runs *Runs `json:"runs,omitempty"`
	// ForkAt lists the fork steps, ascending.
	ForkAt []int `json:"fork_at"`
	// Arms lists the arms, control off included.
	Arms []fork.Arm `json:"arms"`
	// Replicas is the number of forks per checkpoint and arm, voted by
	// majority; 1 for a greedy model.
	Replicas int `json:"replicas"`
	// Params are the world's parameters: those the spec sets, and after
	// Resolve all of them but the grid's axes, defaults filled in, in
	// their canonical types. A parameter is never both here and in Grid.
	Params world.Params `json:"params"`
	// Model is the fake model's noise.
	Model fork.Model `json:"model"`
	// Grid maps scalar parameter names (the world's, or the model's
	// temperature and no_tool) to lists of values; the sweep runs every
	// combination, each as one configuration.
	Grid map[string][]any `json:"grid,omitempty"`
	// Policy is the guard rule of the policy arm.
	Policy *policy.Rule `json:"policy,omitempty"`
	// PolicyAnywhere applies Policy outside what it was chosen for (another
	// fork step, world version, parameters or model: policy.Rule.Scope),
	// which Resolve refuses otherwise; the manifest and the report then
	// say so (PolicyScope).
	PolicyAnywhere bool `json:"policy_anywhere,omitempty"`
	// UnitSeeds is the number of seeds per unit of work (one Parquet file
	// per table and unit); 0 picks it from the spec (ShardSeeds).
	UnitSeeds int `json:"unit_seeds,omitempty"`
	// Transcripts keeps every branch's transcript — its steps after the
	// fork: action, observation, cost — in the branches table's transcript
	// column. A built-in world's sweep leaves them out unless asked
	// (forklab show replays such a branch from its checkpoint): recording
	// them cuts its pairs per second by more than the 10% a default may
	// cost (BenchmarkTranscripts, make bench). An external agent's
	// transcripts are kept whenever it sends them, so the key is refused
	// for an agent, as it is with --from-log (sessions on the log already
	// hold every step).
	Transcripts bool `json:"transcripts,omitempty"`
	// Gate is what forklab gate checks the finished sweep against when it
	// is given no threshold of its own (pipeline/analysis/gate). It says
	// nothing about what the sweep computes: Identity leaves it out.
	Gate *gate.Gate `json:"gate,omitempty"`

	// The keys below say how the sweep runs, not what it computes: a
	// resumed sweep may change them (a fixed agent, more processes, a
	// higher budget), and Identity leaves them out.

	// Agent runs the world as an external agent over forklab-agent/1
	// (docs/agent-protocol.md) instead of a built-in world; World is then
	// the agent's declared name.
	Agent *AgentSpec `json:"agent,omitempty"`
	// MaxErrorRate is the share of error pairs above which the sweep's
	// numbers are reported incomplete and forklab sweep exits non-zero;
	// nil means DefaultMaxErrorRate.
	MaxErrorRate *float64 `json:"max_error_rate,omitempty"`
	// MaxCost stops the sweep, resumably, once its cost reaches any of
	// these totals, by cost field (steps, tokens, usd, seconds). Only an
	// external agent's sweep in one process enforces it (it overshoots by
	// at most one seed's cost); Resolve refuses it for a built-in world,
	// and the static split and the distributed sweep refuse it too.
	MaxCost map[string]float64 `json:"max_cost,omitempty"`
}

// DefaultMaxErrorRate is the share of error pairs a sweep tolerates before
// it reports its numbers incomplete: 1%.
const DefaultMaxErrorRate = 0.01

// ErrorRateLimit is the spec's maximum error rate, its default filled in.
func (s Spec) ErrorRateLimit() float64 {
	if s.MaxErrorRate != nil {
		return *s.MaxErrorRate
	}
	return DefaultMaxErrorRate
}

// AgentSpec says how to run an external agent: the spec file's agent: key
// and forklab sweep's --agent, --parallel, --timeout, --retries.
type AgentSpec struct {
	// Command is the shell command line that starts one agent process.
	Command string `json:"command"`
	// Parallel is the number of agent processes (0: the default, one per
	// CPU, agentproc.DefaultParallel).
	Parallel int `json:"parallel,omitempty"`
	// Timeout bounds each run or branch asked of the agent, e.g. "90s"
	// (default 60s).
	Timeout Duration `json:"timeout,omitempty"`
	// Retries is how many times a failed request is sent again before its
	// pairs become error rows (default 2).
	Retries *int `json:"retries,omitempty"`
	// Environment adds variables to the agent's environment. The manifest
	// records their names, not their values.
	Environment map[string]string `json:"environment,omitempty"`
	// FailOnError is the share of the agent's last 100 attempts that may
	// fail before the sweep stops, resumably (exit 7; its first attempts
	// all failing stop it too: agentproc.FailFast); nil means
	// agentproc.DefaultFailOnError (50%), 1 no limit by rate.
	FailOnError *float64 `json:"fail_on_error,omitempty"`
}

// Duration is a time.Duration written as Go writes it ("90s", "2m").
type Duration time.Duration

// MarshalText writes the duration as "90s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads "90s", "2m30s"; a plain number is seconds.
func (d *Duration) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	if _, err := strconv.ParseFloat(s, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		f, err := floattext.Parse(s)
		if err != nil {
			// 1e-400 seconds would read as 0, the default.
			return fmt.Errorf("duration %s seconds: %s: want a duration in [1ms, %s]", s, strings.TrimSuffix(err.Error(), " ("+floattext.ErrNotFloat64.Error()+")"), fmtDuration(MaxAgentTimeout))
		}
		// No wrap-around: a number of seconds past MaxAgentTimeout is
		// refused by Resolve; past what a Duration holds, here.
		if !(math.Abs(f) <= float64(math.MaxInt64/int64(time.Second))) {
			return fmt.Errorf("duration %s seconds is out of range: want a duration in [1ms, %s]", s, fmtDuration(MaxAgentTimeout))
		}
		*d = Duration(f * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: want a duration in [1ms, %s] such as 90s or 2m", s, fmtDuration(MaxAgentTimeout))
	}
	*d = Duration(v)
	return nil
}

// UnmarshalJSON reads a duration as text ("90s", "2m") or as a number of
// seconds (90), as a YAML spec writes either.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		return err
	}
	switch v := x.(type) {
	case string:
		return d.UnmarshalText([]byte(v))
	case float64:
		return d.UnmarshalText([]byte(strconv.FormatFloat(v, 'g', -1, 64)))
	}
	return fmt.Errorf("duration %s: want a duration in [1ms, %s] such as 90s or 2m", b, fmtDuration(MaxAgentTimeout))
}

// Validate checks the agent's keys, naming the valid range of each: the
// command, parallel, timeout and retries. A sweep checks them before it
// starts the agent.
func (a *AgentSpec) Validate() error {
	switch {
	case strings.TrimSpace(a.Command) == "":
		return keyErr("agent.command", "is empty")
	case a.Parallel < 0 || a.Parallel > MaxAgentParallel:
		return keyErr("agent.parallel", "must be an integer in [1, %d] (0: one per CPU), got %d", MaxAgentParallel, a.Parallel)
	case a.Timeout < 0 || time.Duration(a.Timeout) > MaxAgentTimeout || a.Timeout > 0 && time.Duration(a.Timeout) < time.Millisecond:
		return keyErr("agent.timeout", "must be a duration in [1ms, %s] (0: the default 60s), got %s", fmtDuration(MaxAgentTimeout), time.Duration(a.Timeout))
	case a.Retries != nil && (*a.Retries < 0 || *a.Retries > MaxAgentRetries):
		return keyErr("agent.retries", "must be an integer in [0, %d], got %d", MaxAgentRetries, *a.Retries)
	case a.FailOnError != nil && !(*a.FailOnError >= 0 && *a.FailOnError <= 1):
		return keyErr("agent.fail_on_error", "must be a share in [0, 1] (1: no limit), got %v", *a.FailOnError)
	}
	return nil
}

// Identity is the spec without the keys that say how it runs (agent,
// max_error_rate, max_cost): two sweeps of equal identity write the same
// rows, and one may resume the other.
func (s Spec) Identity() Spec {
	s.Agent, s.MaxErrorRate, s.MaxCost, s.Gate = nil, nil, nil, nil
	return s
}

// redacted is the spec as the manifest records it: the agent's
// environment values replaced by "(set)", so that keys and tokens passed
// to an agent do not end up in results directories.
func (s Spec) redacted() Spec {
	if s.Agent != nil && len(s.Agent.Environment) > 0 {
		a := *s.Agent
		a.Environment = map[string]string{}
		for k := range s.Agent.Environment {
			a.Environment[k] = "(set)"
		}
		s.Agent = &a
	}
	return s
}

// DefaultSpec is the seed's experiment: seeds 0:300, fork step 3, arms off
// and on, one replica, greedy model (temperature 0; half of any departing
// turns would call no tool), the counter world with its defaults.
func DefaultSpec() Spec {
	return Spec{World: "counter", Seeds: Range{0, 300}, ForkAt: []int{3},
		Arms: []fork.Arm{fork.Off, fork.On}, Replicas: 1, Params: world.Params{},
		Model: fork.Model{NoTool: 0.5}}
}

// ModelKeys are the model's parameters a grid may vary beside the world's.
var ModelKeys = []string{"temperature", "no_tool"}

// sameNumber reports whether a decoded JSON or YAML value is the number f.
func sameNumber(v any, f float64) bool {
	switch n := v.(type) {
	case float64:
		return n == f
	case int:
		return float64(n) == f
	}
	return false
}

// modelField is m's field named by one of ModelKeys.
func modelField(m fork.Model, key string) float64 {
	if key == "temperature" {
		return m.Temperature
	}
	return m.NoTool
}

// Config is one point of a spec's grid.
type Config struct {
	ID     int          `json:"config_id"`
	Params world.Params `json:"params"`
	Model  fork.Model   `json:"model"`
}

// Resolved is a spec checked against its world: the world's declaration
// and the configurations.
type Resolved struct {
	Spec    Spec
	Decl    world.Declaration
	Def     lab.Definition
	Configs []Config
	// Fires is the policy rule compiled for the world (nil without one).
	Fires func([]world.Value) bool
	// Source is the opened recorded population of a spec with Runs
	// (OpenRuns); nil for seeds.
	Source recorded.Source
}

// Plan is the lab plan of the resolved spec: its fork steps, the arms with
// off first, its replicas and policy.
func (r Resolved) Plan() lab.Plan {
	arms := []fork.Arm{fork.Off}
	for _, a := range r.Spec.Arms {
		if a != fork.Off {
			arms = append(arms, a)
		}
	}
	return lab.Plan{ForkSteps: r.Spec.ForkAt, Arms: arms, Replicas: r.Spec.Replicas, Fires: r.Fires, Transcripts: r.Spec.Transcripts}
}

// Resolve checks the spec against its world and expands the grid, naming
// the offending key: an unknown world (naming the known ones), an unknown
// parameter or one out of range (naming the valid range), an arm the world
// does not support, a policy rule for another world, more than 10000
// configurations, a fork step no run can reach. The returned spec's Params
// hold every parameter, defaults filled in.
func (s Spec) Resolve() (Resolved, error) {
	def, err := lab.Lookup(s.World)
	if err != nil {
		return Resolved{}, fmt.Errorf("world: %w", err)
	}
	return s.ResolveWith(def)
}

// ResolveWith is Resolve for a world that is not in the registry (an
// external agent's): the spec's World becomes def's declared name.
func (s Spec) ResolveWith(def lab.Definition) (Resolved, error) {
	var err error
	d := def.Declaration()
	s.World = d.Name
	switch {
	case s.Runs != nil && s.Seeds != Range{}:
		return Resolved{}, keyErr("seeds", "%s and recorded runs (runs: %s) both given: a sweep's population is one or the other", s.Seeds, s.Runs.Source)
	case s.Runs != nil && s.Runs.Source == "":
		return Resolved{}, keyErr("runs", "names no source: give a file, a session-log URL or %s", recorded.AgentSource)
	case s.Runs != nil && s.Runs.Count == 0:
		return Resolved{}, keyErr("runs", "%s holds no run", s.Runs.Source)
	case s.Runs != nil && len(s.Grid) > 0:
		return Resolved{}, errors.New("grid: a recorded population's runs were played with one configuration each: sweep it without a grid")
	case s.Runs != nil:
	case s.Seeds.Len() == 0 || s.Seeds.Start > s.Seeds.End:
		return Resolved{}, keyErr("seeds", "the range %s is empty: START must be below END", s.Seeds)
	case s.Seeds.End > MaxSeed:
		return Resolved{}, keyErr("seeds", "END %d is out of range: %s", s.Seeds.End, rangeRule)
	}
	if len(s.ForkAt) == 0 {
		return Resolved{}, keyErr("fork_at", "list at least one fork step")
	}
	if len(s.ForkAt) > MaxForkSteps {
		return Resolved{}, keyErr("fork_at", "lists %d steps; at most %d", len(s.ForkAt), MaxForkSteps)
	}
	if !slices.IsSorted(s.ForkAt) || s.ForkAt[0] < 1 || s.ForkAt[len(s.ForkAt)-1] > MaxForkStep {
		return Resolved{}, keyErr("fork_at", "steps must be integers in [1, %d], ascending, got %v", MaxForkStep, s.ForkAt)
	}
	for i := 1; i < len(s.ForkAt); i++ {
		if s.ForkAt[i] == s.ForkAt[i-1] {
			// As ParseSteps refuses "3,3": a list in a spec file too.
			return Resolved{}, keyErr("fork_at", "step %d is listed twice: list each fork step once (e.g. [1, 2, 3])", s.ForkAt[i])
		}
	}
	if len(s.Arms) < 2 || !slices.Contains(s.Arms, fork.Off) {
		return Resolved{}, errors.New("arms: list the control off and at least one treatment arm")
	}
	if _, err := fork.ParseArms(joinArms(s.Arms)); err != nil {
		return Resolved{}, fmt.Errorf("arms: %w", err)
	}
	for _, a := range s.Arms {
		if !slices.Contains(d.Arms(), string(a)) {
			return Resolved{}, fmt.Errorf("arms: world %s declares no intervention for arm %s (its arms: %s)", d.Name, a, strings.Join(d.Arms(), ", "))
		}
	}
	if slices.Contains(s.Arms, fork.Policy) != (s.Policy != nil) {
		if s.Policy == nil {
			return Resolved{}, errors.New("arms: the policy arm needs a guard rule (--policy FILE)")
		}
		return Resolved{}, errors.New("policy: a guard rule was given but the arms do not include policy")
	}
	r := Resolved{Decl: d, Def: def}
	if s.Policy != nil {
		compile := s.Policy.Compile
		if s.PolicyAnywhere {
			compile = s.Policy.CompileAnywhere
		}
		if r.Fires, err = compile(d); err != nil {
			return Resolved{}, fmt.Errorf("policy: %w", err)
		}
	} else if s.PolicyAnywhere {
		return Resolved{}, errors.New("policy_anywhere: there is no guard rule to apply anywhere (--policy FILE)")
	}
	if s.Gate != nil {
		if err := s.Gate.Validate(); err != nil {
			return Resolved{}, fmt.Errorf("gate: %s", strings.TrimPrefix(err.Error(), gate.ErrInput.Error()+": "))
		}
	}
	if s.UnitSeeds < 0 || s.UnitSeeds > MaxUnitSeeds {
		return Resolved{}, keyErr("unit_seeds", "must be 0 (automatic) or an integer in [1, %d], got %d", MaxUnitSeeds, s.UnitSeeds)
	}
	if s.MaxErrorRate != nil && !(*s.MaxErrorRate >= 0 && *s.MaxErrorRate <= 1) {
		return Resolved{}, keyErr("max_error_rate", "must be a share in [0, 1], got %v", *s.MaxErrorRate)
	}
	for k, v := range s.MaxCost {
		if !(v > 0) || math.IsInf(v, 0) {
			return Resolved{}, keyErr("max_cost", "%s must be a finite number above 0, got %v", k, v)
		}
	}
	if len(s.MaxCost) > 0 && s.Agent == nil {
		// Only an external agent's runners stop at a budget (agentproc): a
		// limit nothing enforces is refused rather than recorded (once its
		// amounts are known to be valid), and that is said before anything
		// about the cost fields it names (--max-cost 5, dollars, once read
		// "world counter does not report usd").
		return Resolved{}, fmt.Errorf("max_cost: world %s is built in and a budget applies only to an external agent's sweep (--agent): leave max_cost (--max-cost) out", d.Name)
	}
	for k := range s.MaxCost {
		if !slices.Contains(world.CostFields, k) {
			return Resolved{}, fmt.Errorf("max_cost: unknown cost field %q (known: %s)", k, strings.Join(world.CostFields, ", "))
		}
		if !d.Cost.Reports(k) {
			return Resolved{}, fmt.Errorf("max_cost: world %s does not report %s (it reports %s)", d.Name, k, strings.Join(d.Cost.Fields, ", "))
		}
	}
	if a := s.Agent; a != nil {
		if err := a.Validate(); err != nil {
			return Resolved{}, err
		}
		if s.Transcripts {
			return Resolved{}, keyErr("transcripts", "records a built-in world's steps; an external agent's transcripts are kept whenever it sends them (docs/agent-protocol.md, Transcripts): leave transcripts (--transcripts) out")
		}
	}
	if s.Replicas < 1 || s.Replicas > MaxReplicas {
		return Resolved{}, keyErr("replicas", "must be an integer in [1, %d], got %d", MaxReplicas, s.Replicas)
	}
	if err := s.Model.Validate(); err != nil {
		return Resolved{}, fmt.Errorf("model: %w", err)
	}
	// A parameter is either one value for every configuration (params) or
	// an axis of the grid, never both: the grid's values would silently
	// replace the single one, which the manifest would still record.
	for _, k := range slices.Sorted(maps.Keys(s.Grid)) {
		if v, ok := s.Params[k]; ok {
			return Resolved{}, fmt.Errorf("params: %s is given a single value (params: %s: %v) and is a grid axis too (grid: %s: %s): keep one of the two", k, k, v, k, ListText(s.Grid[k]))
		}
	}
	base, err := d.Resolve(s.Params)
	if err != nil {
		return Resolved{}, fmt.Errorf("params: %w", err)
	}
	s.Params = base
	keys := make([]string, 0, len(s.Grid))
	size := 1
	for k, vs := range s.Grid {
		keys = append(keys, k)
		p, isParam := d.Param(k)
		if !isParam && !slices.Contains(ModelKeys, k) {
			return Resolved{}, fmt.Errorf("grid: unknown parameter %q (world %s: %s; the model's: %s)", k, d.Name, d.ParamsText(), strings.Join(ModelKeys, ", "))
		}
		if isParam && !p.Kind.Scalar() {
			return Resolved{}, fmt.Errorf("grid: %s is a list; a grid varies scalar parameters only", k)
		}
		if len(vs) == 0 {
			return Resolved{}, fmt.Errorf("grid: %s lists no values", k)
		}
		if size *= len(vs); size > MaxConfigs {
			return Resolved{}, fmt.Errorf("grid: more than %d configurations (a grid makes one per combination of its values; at most %d)", MaxConfigs, MaxConfigs)
		}
	}
	slices.Sort(keys)
	orig := s.Grid
	s.Grid = nil
	if len(keys) > 0 {
		s.Grid = map[string][]any{}
	}
	configs := []Config{{Params: base, Model: s.Model}}
	for _, k := range keys {
		var vals []any
		for _, v := range orig[k] {
			c, err := gridValue(d, k, v)
			if err != nil {
				return Resolved{}, fmt.Errorf("grid: %w", err)
			}
			if slices.Contains(vals, c) {
				return Resolved{}, fmt.Errorf("grid: %s lists %v twice: two configurations would be the same", k, c)
			}
			vals = append(vals, c)
		}
		s.Grid[k] = vals
		var next []Config
		for _, c := range configs {
			for _, v := range vals {
				c2 := Config{Params: c.Params.Clone(), Model: c.Model}
				switch k {
				case "temperature":
					c2.Model.Temperature = v.(float64)
				case "no_tool":
					c2.Model.NoTool = v.(float64)
				default:
					c2.Params[k] = v
				}
				next = append(next, c2)
			}
		}
		configs = next
	}
	for i := range configs {
		configs[i].ID = i
		if err := configs[i].Model.Validate(); err != nil {
			return Resolved{}, fmt.Errorf("model (config %d): %w", i, err)
		}
		inst, err := def.Open(configs[i].Params, configs[i].Model)
		if err != nil {
			return Resolved{}, fmt.Errorf("params (config %d): %w", i, err)
		}
		maxSteps := inst.MaxSteps()
		inst.Close()
		if last := s.ForkAt[len(s.ForkAt)-1]; maxSteps > 0 && last > maxSteps {
			return Resolved{}, keyErr("fork_at", "step %d is past the most steps a run can take (%d): no run reaches it (fork steps are integers in [1, %d] here)", last, maxSteps, maxSteps)
		}
	}
	if err := checkSize(s, len(configs)); err != nil {
		return Resolved{}, err
	}
	if s.Policy != nil && !s.PolicyAnywhere {
		if out := PolicyScope(*s.Policy, d, s.ForkAt, configs); len(out) > 0 {
			return Resolved{}, fmt.Errorf("policy: the rule was chosen %s; this sweep has %s: its features mean something else there, "+
				"so its numbers would not be the rule's: search a rule on a sweep like this one (forklab policy DIR --fork-step N), "+
				"or give --policy-anywhere (spec: policy_anywhere: true) to apply it anyway (the manifest and the report then say so)",
				PolicyOrigin(*s.Policy), strings.Join(out, "; "))
		}
	}
	// The spec's params hold the parameters every configuration shares;
	// a grid axis has a value per configuration (the configs table).
	s.Params = base.Clone()
	for k := range s.Grid {
		delete(s.Params, k)
	}
	r.Spec, r.Configs = s, configs
	return r, nil
}

// PolicyScope lists where a sweep of world d at forkSteps over configs
// would apply rule outside what it was chosen for (policy.Rule.Scope).
func PolicyScope(rule policy.Rule, d world.Declaration, forkSteps []int, configs []Config) []string {
	params, models := map[int]world.Params{}, map[int]fork.Model{}
	for _, c := range configs {
		params[c.ID], models[c.ID] = c.Params, c.Model
	}
	return rule.Scope(d, forkSteps, params, models)
}

// PolicyOrigin says where a rule was chosen: "at fork step 3 of config 0
// of world counter 2, on seeds 0:300 (the 70% not held out)"; "for world
// counter 2" for a rule written by hand.
func PolicyOrigin(rule policy.Rule) string {
	o := ""
	if rule.ForkStep != nil {
		o = fmt.Sprintf("at fork step %d", *rule.ForkStep)
		if rule.ConfigID != nil {
			o += fmt.Sprintf(" of config %d", *rule.ConfigID)
		}
		o += " "
	}
	o += fmt.Sprintf("for world %s %s", rule.World, rule.WorldVersion)
	if sp := rule.Search; sp != nil && sp.Runs != "" {
		o += fmt.Sprintf(", on the %d recorded runs of %s (the %g%% not held out)", sp.Count, sp.Runs, math.Round(100*(1-sp.Holdout)*1000)/1000)
	} else if sp != nil {
		o += fmt.Sprintf(", on seeds %d:%d (the %g%% not held out)", sp.Start, sp.End, math.Round(100*(1-sp.Holdout)*1000)/1000)
	}
	return o
}

// PolicySample says whether the policy arm of spec plays the seeds its
// rule was searched on, to stand beside the arm's headline: "in-sample:
// the rule was searched on 210 of these 300 seeds" (its numbers then
// flatter it: read the held-out figures of forklab policy), or
// "out-of-sample: the rule was searched on none of these seeds"; for a
// recorded population, in-sample when the rule was searched on this very
// population (its source and listing checksum), out-of-sample when on
// another; "" without a rule, or for a rule that does not record its
// search seeds (one written by hand).
func PolicySample(spec Spec) string {
	r := spec.Policy
	if r == nil || r.Search == nil {
		return ""
	}
	if sp, runs := r.Search, spec.Runs; runs != nil || sp.Runs != "" {
		switch {
		case runs != nil && sp.Runs == runs.Source && sp.CRC32C == runs.CRC32C:
			return fmt.Sprintf("in-sample: the rule was searched on about %d of these %d recorded runs (those not held out)", uint64(math.Round(float64(runs.Count)*(1-sp.Holdout))), runs.Count)
		case sp.Runs != "":
			return "out-of-sample: the rule was searched on the recorded runs of " + sp.Runs + ", not these"
		}
		return fmt.Sprintf("the rule was searched on seeds %d:%d; these are recorded runs, which may be runs of the same tasks", sp.Start, sp.End)
	}
	n, exact := r.Searched(spec.Seeds.Start, spec.Seeds.End)
	if n == 0 {
		return "out-of-sample: the rule was searched on none of these seeds"
	}
	about := ""
	if !exact {
		about = "about "
	}
	return fmt.Sprintf("in-sample: the rule was searched on %s%d of these %d seeds", about, n, spec.Seeds.Len())
}

// PolicyAnywhereLine is the warning a sweep run with --policy-anywhere
// carries (forklab sweep on standard error, the report under its header):
// where its rule was chosen and where it was applied instead; "" without
// policy_anywhere.
func PolicyAnywhereLine(spec Spec, d world.Declaration, configs []Config) string {
	if !spec.PolicyAnywhere || spec.Policy == nil {
		return ""
	}
	out := PolicyScope(*spec.Policy, d, spec.ForkAt, configs)
	if len(out) == 0 {
		return "POLICY ANYWHERE: the sweep was told to apply its rule anywhere (--policy-anywhere), and applies it where it was chosen (" + PolicyOrigin(*spec.Policy) + ")"
	}
	return fmt.Sprintf("POLICY ANYWHERE: the policy arm's rule was chosen %s and is applied here with %s (--policy-anywhere): "+
		"its features may mean something else here, and its numbers are not the rule's", PolicyOrigin(*spec.Policy), strings.Join(out, "; "))
}

// checkSize bounds the sweep's size, so that nothing it holds grows with
// the seed range beyond a known bound and no count wraps: at most MaxUnits
// units (the manifest lists each unit's files, the ledger and a
// distributed sweep's coordinator one entry per unit), and at most MaxRows
// branch rows (every count stays exact in JSON and float64). Units are
// made one at a time (Units), never listed up front. The error names the
// bound and the largest seed range that fits.
func checkSize(s Spec, configs int) error {
	size := s.ShardSeeds()
	pop := s.Population()
	perConfig := (pop.Len()-1)/size + 1
	if units := perConfig * uint64(configs); perConfig > MaxUnits || units > MaxUnits {
		fit := uint64(MaxUnits/configs) * size
		return keyErr("seeds", "%s is %s of %s in each of %s; a sweep holds at most %d units (its manifest lists every unit's files): "+
			"sweep at most %d seeds at a time (e.g. %d:%d), or raise unit_seeds (up to %d)",
			pop, plural.Count(perConfig, "unit"), plural.Count(size, "seed"), plural.Count(configs, "configuration"), MaxUnits, fit, pop.Start, pop.Start+fit, MaxUnitSeeds)
	}
	perSeed := uint64(len(s.ForkAt)) * uint64(len(s.Arms)) * uint64(s.Replicas) * uint64(configs)
	if rows := pop.Len(); rows > MaxRows/perSeed {
		return keyErr("seeds", "%s would make more than %d branch rows (%d per seed: fork steps × arms × replicas × configurations); "+
			"a sweep writes at most %d (2^53, the largest count JSON readers hold exactly): sweep at most %d seeds at a time",
			pop, uint64(MaxRows), perSeed, uint64(MaxRows), MaxRows/perSeed)
	}
	return nil
}

// KeyError is a spec key whose value is refused: Key is the spec's key
// (fork_at, seeds, agent.timeout), Err says why and names the valid range.
// forklab sweep names the flag instead when a flag set the key.
type KeyError struct {
	Key string
	Err error
}

func (e *KeyError) Error() string { return e.Key + ": " + e.Err.Error() }
func (e *KeyError) Unwrap() error { return e.Err }

func keyErr(key, format string, args ...any) error {
	return &KeyError{Key: key, Err: fmt.Errorf(format, args...)}
}

// gridValue checks one grid value of key k.
func gridValue(d world.Declaration, k string, v any) (any, error) {
	if p, ok := d.Param(k); ok {
		return p.Parse(v)
	}
	p := world.Param{Name: k, Kind: world.ParamFloat, Min: world.Bound(0), Max: world.Bound(1)}
	return p.Parse(v)
}

// ListText writes a grid axis's values as a spec file would: "[0, 0.2]".
func ListText(vs []any) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprint(v)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// listAny is ListText for a value decoded from a spec file.
func listAny(v any) string {
	if vs, ok := v.([]any); ok {
		return ListText(vs)
	}
	return fmt.Sprint(v)
}

// The bounds of a spec's keys; the flags that set them share them.
const (
	// MaxConfigs bounds a grid's configurations.
	MaxConfigs = 10000
	// MaxForkStep bounds a fork step (a world bounds it further by the
	// most steps its runs can take); MaxForkSteps the number of steps.
	MaxForkStep  = 1 << 20
	MaxForkSteps = 10000
	// MaxReplicas bounds the forks per checkpoint and arm.
	MaxReplicas = 1000
	// MaxUnitSeeds bounds unit_seeds.
	MaxUnitSeeds = 1 << 24
	// MaxAgentParallel, MaxAgentRetries and MaxAgentTimeout bound an
	// external agent's processes, retries and time per request.
	MaxAgentParallel = 1024
	MaxAgentRetries  = 100
	MaxAgentTimeout  = 24 * time.Hour
	// MaxUnits bounds a sweep's units and MaxRows its branch rows
	// (checkSize). Every unit is four files the manifest lists and that
	// results.duckdb, report and sql bind: 2^16 units keep the manifest
	// near 35 MB.
	MaxUnits = 1 << 16
	MaxRows  = 1 << 53
)

// fmtDuration writes d as Go does, without trailing zero units: 24h.
func fmtDuration(d time.Duration) string {
	s := d.String()
	for _, z := range []string{"m0s", "h0m"} {
		if strings.HasSuffix(s, z) {
			s = strings.TrimSuffix(s, z[1:])
		}
	}
	return s
}

func joinArms(arms []fork.Arm) string {
	s := make([]string, len(arms))
	for i, a := range arms {
		s[i] = string(a)
	}
	return strings.Join(s, ",")
}

// ReadSpecFile reads a spec from a .json, .yaml or .yml file over base:
// keys the file sets replace base's, keys it omits keep base's values.
// Unknown keys are errors naming the key.
func ReadSpecFile(path string, base Spec) (Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return base, fmt.Errorf("read spec: %w", err)
	}
	var v any
	if err := checkSpecNumbers(path, b, base); err != nil {
		return base, err
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		if err := yaml.Unmarshal(b, &v); err != nil {
			// yaml words some errors over several lines: one line.
			msg := strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "unmarshal errors:\n", "")), " ")
			return base, fmt.Errorf("spec %s: %s", path, msg)
		}
		v = normalizeYAML(v)
	case ".json":
		if err := json.Unmarshal(b, &v); err != nil {
			return base, fmt.Errorf("spec %s: %v", path, strings.TrimPrefix(err.Error(), "json: "))
		}
		if err := jsondup.Check(b); err != nil {
			return base, fmt.Errorf("spec %s: %w", path, err)
		}
	default:
		return base, fmt.Errorf("spec %s: want a .json, .yaml or .yml file", path)
	}
	top, ok := v.(map[string]any)
	if !ok {
		return base, fmt.Errorf("spec %s: want a mapping of keys (world, seeds, fork_at, arms, …) at the top", path)
	}
	// fork_at may be written as the flag is: 3, "1,2,3" or "1-4".
	switch f := top["fork_at"].(type) {
	case float64, int:
		top["fork_at"] = []any{f}
	case string:
		steps, err := ParseSteps(f)
		if err != nil {
			return base, fmt.Errorf("spec %s: fork_at: %w", path, err)
		}
		top["fork_at"] = steps
	}
	// The model's noise is one value or a grid axis, never both (Resolve
	// checks the world's parameters; the model is a struct, whose keys the
	// decoded spec no longer tells apart from their defaults). A value
	// equal to base's is no single value: a manifest's spec holds the
	// model's fields whatever the grid varies, and is a spec file too.
	if g, ok := top["grid"].(map[string]any); ok {
		if m, ok := top["model"].(map[string]any); ok {
			for _, k := range ModelKeys {
				_, inGrid := g[k]
				if v, inModel := m[k]; inGrid && inModel && !sameNumber(v, modelField(base.Model, k)) {
					return base, fmt.Errorf("spec %s: model: %s is given a single value (model: %s: %v) and is a grid axis too (grid: %s: %s): keep one of the two", path, k, k, v, k, listAny(g[k]))
				}
			}
		}
	}
	if b, err = json.Marshal(top); err != nil {
		return base, fmt.Errorf("spec %s: %w", path, err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	s := base
	_, hasRuns := top["runs"]
	_, hasSeeds := top["seeds"]
	switch {
	case hasRuns && !hasSeeds:
		s.Seeds = Range{} // the population is the runs
	case hasSeeds && !hasRuns:
		s.Runs = nil
	}
	if err := d.Decode(&s); err != nil {
		return base, fmt.Errorf("spec %s: %s", path, specError(err))
	}
	slices.Sort(s.ForkAt)
	return s, nil
}

// checkSpecNumbers refuses a number in spec file b (path says JSON or
// YAML) that a float64 cannot hold — 1e-400, which decoders read as 0
// without a word, 1e400, .inf, .nan — naming the key and, where it is known
// (a spec key, a built-in world's parameter), its valid range. A file that
// does not decode is left to the decoder's error.
func checkSpecNumbers(path string, b []byte, base Spec) error {
	var bad []string // key, literal, why
	var world string
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		var doc yaml.Node
		if yaml.Unmarshal(b, &doc) != nil {
			return nil
		}
		var walk func(n *yaml.Node, key string)
		walk = func(n *yaml.Node, key string) {
			if len(bad) > 0 {
				return
			}
			switch n.Kind {
			case yaml.DocumentNode:
				for _, c := range n.Content {
					walk(c, key)
				}
			case yaml.MappingNode:
				for i := 0; i+1 < len(n.Content); i += 2 {
					k := n.Content[i].Value
					if key == "" && k == "world" {
						world = n.Content[i+1].Value
					}
					walk(n.Content[i+1], joinKey(key, k))
				}
			case yaml.SequenceNode:
				for i, c := range n.Content {
					walk(c, fmt.Sprintf("%s[%d]", key, i))
				}
			case yaml.ScalarNode:
				var err error
				switch {
				case n.Tag == "!!float":
					var f float64
					if n.Decode(&f) == nil {
						err = floattext.Check(n.Value, f)
					}
				case n.Tag == "!!str" && n.Style == 0:
					// YAML reads 1e400 as text: a number too large.
					if _, perr := strconv.ParseFloat(n.Value, 64); perr != nil && errors.Is(perr, strconv.ErrRange) {
						_, err = floattext.Parse(n.Value)
					}
				}
				if err != nil {
					bad = []string{key, err.Error()}
				}
			}
		}
		walk(&doc, "")
	case ".json":
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var v any
		if d.Decode(&v) != nil {
			return nil
		}
		var walk func(x any, key string)
		walk = func(x any, key string) {
			if len(bad) > 0 {
				return
			}
			switch t := x.(type) {
			case map[string]any:
				if w, ok := t["world"].(string); ok && key == "" {
					world = w
				}
				for _, k := range slices.Sorted(maps.Keys(t)) {
					walk(t[k], joinKey(key, k))
				}
			case []any:
				for i, c := range t {
					walk(c, fmt.Sprintf("%s[%d]", key, i))
				}
			case json.Number:
				if _, err := floattext.Parse(string(t)); errors.Is(err, floattext.ErrNotFloat64) {
					bad = []string{key, err.Error()}
				}
			}
		}
		walk(v, "")
	}
	if len(bad) == 0 {
		return nil
	}
	key, why := bad[0], strings.TrimSuffix(bad[1], " ("+floattext.ErrNotFloat64.Error()+")")
	msg := fmt.Sprintf("spec %s: %s: %s", path, key, why)
	name, _, _ := strings.Cut(key, "[")
	if strings.HasPrefix(name, "max_cost.") {
		name = "max_cost" // each amount of the budget
	}
	if r, ok := keyRanges[name]; ok {
		return fmt.Errorf("%s; %s must be %s", msg, name, r)
	}
	if world == "" {
		world = base.World
	}
	if p, ok := strings.CutPrefix(name, "params."); ok {
		name = p
	} else if p, ok := strings.CutPrefix(name, "grid."); ok {
		name = p
	} else {
		return errors.New(msg)
	}
	if def, err := lab.Lookup(world); err == nil {
		if p, ok := def.Declaration().Param(name); ok {
			return fmt.Errorf("%s; %s must be %s", msg, name, p.Range())
		}
	}
	return errors.New(msg)
}

func joinKey(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

// specError words a decoding error in the spec's own terms: its keys, not
// Go's types.
func specError(err error) string {
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		// The gate's thresholds are an embedded struct, which encoding/json
		// names in the path; the spec key does not.
		typ.Field = strings.Replace(typ.Field, ".Thresholds.", ".", 1)
		key := typ.Field
		if strings.HasPrefix(key, "max_cost.") {
			key = "max_cost"
		}
		if g, ok := strings.CutPrefix(key, "gate.per_arm."); ok {
			// An arm's thresholds range as the gate's (encoding/json may
			// or may not name the arm in the path).
			if _, k, found := strings.Cut(g, "."); found {
				g = k
			}
			key = "gate." + g
		}
		r, ok := keyRanges[key]
		ok = ok && typ.Type != nil && kindOf(typ.Type.Kind().String()) == "a number"
		if ok && strings.HasPrefix(typ.Value, "number") {
			// A number that does not fit the key's type (1e400, a
			// fraction, 2^64): out of range, not of another kind.
			return fmt.Sprintf("%s must be %s, got %s", typ.Field, r, strings.TrimPrefix(typ.Value, "number "))
		} else if ok && typ.Value == "string" {
			// YAML reads a number too large for a float (1e400) as text.
			return fmt.Sprintf("%s must be %s, got text (or a number too large to read)", typ.Field, r)
		}
		return fmt.Sprintf("key %s: a %s cannot be read as %s", typ.Field, typ.Value, kindOf(typ.Type.Kind().String()))
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	return strings.Replace(msg, "unknown field", "unknown key", 1)
}

// keyRanges words the valid values of the spec's numeric keys, for a number
// that does not even decode (a fraction for an integer, 1e400, 2^64).
var keyRanges = map[string]string{
	"replicas":            fmt.Sprintf("an integer in [1, %d]", MaxReplicas),
	"unit_seeds":          fmt.Sprintf("0 (automatic) or an integer in [1, %d]", MaxUnitSeeds),
	"fork_at":             fmt.Sprintf("integers in [1, %d]", MaxForkStep),
	"agent.parallel":      fmt.Sprintf("an integer in [1, %d]", MaxAgentParallel),
	"agent.retries":       fmt.Sprintf("an integer in [0, %d]", MaxAgentRetries),
	"agent.timeout":       fmt.Sprintf("a duration in [1ms, %s] such as 90s, or a number of seconds", fmtDuration(MaxAgentTimeout)),
	"agent.fail_on_error": "a share in [0, 1]",
	// What forklab recorded of a recorded population's source.
	"runs.runs":         fmt.Sprintf("an integer in [0, %d]", uint64(math.MaxUint64)),
	"runs.bytes":        fmt.Sprintf("an integer in [0, %d]", int64(math.MaxInt64)),
	"max_error_rate":    "a share in [0, 1]",
	"max_cost":          "a finite number above 0",
	"model.temperature": "a number in [0, 1]",
	"model.no_tool":     "a number in [0, 1]",
	// The gate's thresholds (pipeline/analysis/gate).
	"gate.max_harm_rate":  "a number in [0, 1]",
	"gate.max_harmed":     fmt.Sprintf("an integer in [0, %d]", int64(gate.MaxExact)),
	"gate.min_net":        fmt.Sprintf("an integer in [%d, %d]", int64(-gate.MaxExact), int64(gate.MaxExact)),
	"gate.min_net_rate":   "a number in [-1, 1]",
	"gate.max_p":          "a number in (0, 1]",
	"gate.max_error_rate": "a number in [0, 1]",
	"gate.min_score_diff": "a finite number",
}

func kindOf(k string) string {
	switch k {
	case "slice":
		return "a list"
	case "struct", "map":
		return "a mapping"
	case "string":
		return "text"
	case "bool":
		return "true or false"
	}
	return "a number"
}

// normalizeYAML turns the map[string]any trees yaml decodes into values
// encoding/json can marshal.
func normalizeYAML(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			t[k] = normalizeYAML(x)
		}
	case []any:
		for i, x := range t {
			t[i] = normalizeYAML(x)
		}
	}
	return v
}
