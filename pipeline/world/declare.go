package world

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Kind is the type of a declared value: a feature, a hidden truth, a task
// draw or a scalar parameter.
type Kind string

// The kinds. In Parquet and DuckDB: bool is BOOLEAN, int BIGINT, float
// DOUBLE, enum VARCHAR (dictionary-encoded).
const (
	Bool  Kind = "bool"
	Int   Kind = "int"
	Float Kind = "float"
	Enum  Kind = "enum"
)

// Kinds lists the kinds a field may have, in documentation order.
var Kinds = []Kind{Bool, Int, Float, Enum}

// Field declares one named value a world reports about a run: a task draw,
// a pre-decision feature or a hidden truth.
type Field struct {
	// Name is the column name: snake_case, [a-z][a-z0-9_]*, at most 63
	// bytes.
	Name string `json:"name"`
	// Kind is the value's type.
	Kind Kind `json:"type"`
	// Values lists an enum's values, in the order slices report them;
	// only for Enum.
	Values []string `json:"values,omitempty"`
	// Unit names the unit of a number ("steps", "tokens"), if any.
	Unit string `json:"unit,omitempty"`
	// Nullable says the value may be missing (for instance a task's
	// freeze_at when the sensor never sticks). Features and hidden truths
	// of a run that did not fail are never null unless declared so.
	Nullable bool `json:"nullable,omitempty"`
	// Description says what the value means, for people (forklab worlds,
	// schemas/README.md, the report).
	Description string `json:"description"`
}

// Intervention is what a treatment arm does at the fork.
type Intervention struct {
	// Arm is "on" (the recovery) or "placebo" (the content-free
	// recovery). The policy arm applies on's action where its rule fires;
	// off and aa apply nothing.
	Arm string `json:"arm"`
	// Action names the action applied, one of the declaration's Actions.
	Action string `json:"action"`
	// Description says what the action does.
	Description string `json:"description"`
}

// Cost field names, the columns cost_<name> of checkpoints and branches
// and extra_<name> of pairs.
const (
	CostSteps   = "steps"   // turns taken, the intervention included (BIGINT)
	CostTokens  = "tokens"  // model tokens, prompt and completion (BIGINT)
	CostUSD     = "usd"     // money, in US dollars (DOUBLE)
	CostSeconds = "seconds" // wall time, in seconds (DOUBLE)
)

// CostFields lists every cost field in column order.
var CostFields = []string{CostSteps, CostTokens, CostUSD, CostSeconds}

// CostModel says which cost fields a world reports and how it charges.
type CostModel struct {
	// Fields lists the cost fields reported, a subset of CostFields in
	// that order; steps is always among them.
	Fields []string `json:"fields"`
	// Description says how cost accrues ("each turn costs 200 tokens plus
	// 40 per earlier turn").
	Description string `json:"description"`
}

// Reports says whether the model reports cost field name.
func (c CostModel) Reports(name string) bool { return slices.Contains(c.Fields, name) }

// Declaration is everything downstream of a world needs to know about it:
// the sweep, the Parquet schema, the SQL views, the policy search and the
// report read it and nothing else. Built-in worlds return one from
// World.Declaration; an external agent sends one in reply to initialize
// (docs/agent-protocol.md). manifest.json carries it.
type Declaration struct {
	// Name identifies the world in specs, checkpoints, policy files and
	// tables: [a-z][a-z0-9_]*.
	Name string `json:"name"`
	// Version changes whenever the world's rules change in a way that
	// changes outcomes: a checkpoint or policy of another version is
	// refused.
	Version string `json:"version"`
	// Description says what the world is, in a sentence or two.
	Description string `json:"description"`
	// Params are the world's parameters, set per configuration.
	Params []Param `json:"params"`
	// Task lists what a seed draws, one row of the tasks table per seed.
	Task []Field `json:"task"`
	// Features are the pre-decision signals recorded at a checkpoint:
	// what an observer could compute before deciding to recover. Slices
	// and policy triggers are built from them.
	Features []Field `json:"features"`
	// Hidden is the ground truth at a checkpoint: recorded for evaluation,
	// stored as hidden_<name> columns, never a feature.
	Hidden []Field `json:"hidden"`
	// FaultFlag names a bool Hidden field that is true when the run had a
	// fault, the kind the recovery exists for. The harm cap "on clean
	// runs" counts harms where it is false. Empty: no such flag, and every
	// harm counts.
	FaultFlag string `json:"fault_flag,omitempty"`
	// Actions names the actions of the world's agent; an Action value is
	// an index into it. Actions[0] is "no_tool", the model turn that called
	// no tool.
	Actions []string `json:"actions,omitempty"`
	// Interventions are the treatment arms the world supports besides
	// the control off and the A/A arm aa, which every world supports.
	Interventions []Intervention `json:"interventions"`
	// Cost is the cost model.
	Cost CostModel `json:"cost"`
	// Score, if set, declares a graded outcome every branch reports
	// beside success (score.go); nil for a pass/fail world.
	Score *ScoreSpec `json:"score,omitempty"`
	// Nondeterministic is set by an agent whose outcomes vary between
	// identical requests (a real model sampled above temperature 0): its
	// sweeps need replicas. Built-in worlds are deterministic.
	Nondeterministic bool `json:"nondeterministic,omitempty"`
	// Volatile lists JSON paths (JSONPath patterns) into start's result
	// that change from run to run and mean nothing — a framework's
	// checkpoint ids, timestamps, message ids: forklab agent check's
	// repeatability comparison ignores them. Nothing else reads them: the
	// checkpoint is stored and handed back as the agent wrote it.
	Volatile []string `json:"volatile,omitempty"`
}

var namePattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

// ReservedColumns are the fixed column names of the tables and views a
// feature, hidden field (after its hidden_ prefix), task field or parameter
// must not take.
var ReservedColumns = []string{
	"config_id", "fork_step", "seed", "status", "error", "over", "checkpoint",
	"arm", "replica", "replicas", "intervened", "success", "details", "transcript",
	"control_wins", "treatment_wins", "control_success", "treatment_success",
	"label", "quadrant", "fault", "world", "world_version", "params",
	"temperature", "no_tool", "feature", "param", "type", "value_num", "value_text",
	"split", "cell", "n", "score", "score_control", "score_treated", "score_diff",
	"run_id", "metadata",
}

// Feature returns the declared feature named name, its position, and
// whether there is one.
func (d Declaration) Feature(name string) (Field, int, bool) {
	for i, f := range d.Features {
		if f.Name == name {
			return f, i, true
		}
	}
	return Field{}, -1, false
}

// FeatureNames lists the features' names in declaration order.
func (d Declaration) FeatureNames() []string {
	names := make([]string, len(d.Features))
	for i, f := range d.Features {
		names[i] = f.Name
	}
	return names
}

// Action returns the Action value of the named action.
func (d Declaration) Action(name string) (Action, bool) {
	i := slices.Index(d.Actions, name)
	return Action(i), i >= 0
}

// Intervention returns the intervention of arm ("on", "placebo"), and
// whether the world supports it.
func (d Declaration) Intervention(arm string) (Intervention, bool) {
	for _, iv := range d.Interventions {
		if iv.Arm == arm {
			return iv, true
		}
	}
	return Intervention{}, false
}

// FaultIndex is the position of the fault flag among the hidden fields, or
// -1 when the world declares none.
func (d Declaration) FaultIndex() int {
	for i, h := range d.Hidden {
		if h.Name == d.FaultFlag {
			return i
		}
	}
	return -1
}

// Validate checks a declaration and names the first problem: a malformed
// or repeated name, a name that collides with a fixed column or another
// declared name, an unknown kind, an enum without values, a fault flag that
// is not a bool hidden field, an intervention for an unknown arm or action,
// a cost field that does not exist, a parameter whose default is out of
// its own range.
func (d Declaration) Validate() error {
	if !namePattern.MatchString(d.Name) {
		return fmt.Errorf("world name %q: want [a-z][a-z0-9_]*, at most 63 bytes", d.Name)
	}
	if strings.TrimSpace(d.Version) == "" {
		return fmt.Errorf("world %s: version is empty", d.Name)
	}
	columns := map[string]string{} // column name -> what declared it
	for _, c := range ReservedColumns {
		columns[c] = "a fixed column"
	}
	for _, c := range CostFields {
		columns["cost_"+c] = "a fixed column"
		columns["extra_"+c] = "a fixed column"
	}
	claim := func(col, what string) error {
		if prev, ok := columns[col]; ok {
			return fmt.Errorf("world %s: %s is named %q, which is already %s", d.Name, what, col, prev)
		}
		for _, prefix := range []string{"cost_", "extra_"} {
			if strings.HasPrefix(col, prefix) {
				return fmt.Errorf("world %s: %s is named %q: the %s prefix is for the fixed cost columns", d.Name, what, col, prefix)
			}
		}
		columns[col] = what
		return nil
	}
	check := func(group string, fs []Field) error {
		for _, f := range fs {
			what := fmt.Sprintf("%s field %q", group, f.Name)
			if !namePattern.MatchString(f.Name) {
				return fmt.Errorf("world %s: %s: want [a-z][a-z0-9_]*, at most 63 bytes", d.Name, what)
			}
			if !slices.Contains(Kinds, f.Kind) {
				return fmt.Errorf("world %s: %s has type %q (known: bool, int, float, enum)", d.Name, what, f.Kind)
			}
			if (f.Kind == Enum) != (len(f.Values) > 0) {
				if f.Kind == Enum {
					return fmt.Errorf("world %s: enum %s lists no values", d.Name, what)
				}
				return fmt.Errorf("world %s: %s lists values but is not an enum", d.Name, what)
			}
			seen := map[string]bool{}
			for _, v := range f.Values {
				if v == "" || seen[v] {
					return fmt.Errorf("world %s: enum %s has an empty or repeated value %q", d.Name, what, v)
				}
				seen[v] = true
			}
		}
		return nil
	}
	if err := check("task", d.Task); err != nil {
		return err
	}
	if err := check("feature", d.Features); err != nil {
		return err
	}
	if err := check("hidden", d.Hidden); err != nil {
		return err
	}
	if len(d.Features) == 0 {
		return fmt.Errorf("world %s declares no features: slices and policies need at least one", d.Name)
	}
	for _, f := range d.Features {
		if strings.HasPrefix(f.Name, "hidden_") {
			return fmt.Errorf("world %s: feature %q: the hidden_ prefix is for hidden truth", d.Name, f.Name)
		}
		if err := claim(f.Name, fmt.Sprintf("feature %q", f.Name)); err != nil {
			return err
		}
	}
	for _, h := range d.Hidden {
		if err := claim("hidden_"+h.Name, fmt.Sprintf("hidden field %q", h.Name)); err != nil {
			return err
		}
	}
	// Task fields are the columns of the tasks table, which a query joins
	// to checkpoints or pairs on (config_id, seed): a task field takes no
	// name of a fixed column, a feature or a hidden_ column, nor another
	// task field's. It may share a parameter's name: the parameter is then
	// the distribution the field is drawn from (the counter's slack), and
	// no table or view holds both.
	taskCols := map[string]bool{}
	for _, t := range d.Task {
		what := fmt.Sprintf("task field %q", t.Name)
		switch {
		case taskCols[t.Name]:
			return fmt.Errorf("world %s: %s is repeated", d.Name, what)
		case strings.HasPrefix(t.Name, "hidden_"):
			return fmt.Errorf("world %s: %s: the hidden_ prefix is for hidden truth", d.Name, what)
		case strings.HasPrefix(t.Name, "cost_"), strings.HasPrefix(t.Name, "extra_"):
			return fmt.Errorf("world %s: %s: the cost_ and extra_ prefixes are for the fixed cost columns", d.Name, what)
		}
		if prev, ok := columns[t.Name]; ok {
			return fmt.Errorf("world %s: %s is named %q, which is already %s", d.Name, what, t.Name, prev)
		}
		taskCols[t.Name] = true
	}
	for _, p := range d.Params {
		if err := p.validate(); err != nil {
			return fmt.Errorf("world %s: %w", d.Name, err)
		}
		if err := claim(p.Name, fmt.Sprintf("parameter %q", p.Name)); err != nil {
			return err
		}
	}
	if d.FaultFlag != "" {
		i := d.FaultIndex()
		if i < 0 || d.Hidden[i].Kind != Bool {
			return fmt.Errorf("world %s: fault_flag %q must name a bool hidden field", d.Name, d.FaultFlag)
		}
	}
	if len(d.Actions) > 0 && d.Actions[0] != "no_tool" {
		return fmt.Errorf("world %s: actions[0] must be \"no_tool\", got %q", d.Name, d.Actions[0])
	}
	if len(d.Actions) > 255 {
		return fmt.Errorf("world %s declares %d actions, more than 255", d.Name, len(d.Actions))
	}
	arms := map[string]bool{}
	for _, iv := range d.Interventions {
		if iv.Arm != "on" && iv.Arm != "placebo" {
			return fmt.Errorf("world %s: intervention for arm %q: only on and placebo take one", d.Name, iv.Arm)
		}
		if arms[iv.Arm] {
			return fmt.Errorf("world %s: arm %s has two interventions", d.Name, iv.Arm)
		}
		arms[iv.Arm] = true
		if iv.Action == "" {
			return fmt.Errorf("world %s: the %s intervention names no action", d.Name, iv.Arm)
		}
		if len(d.Actions) > 0 && !slices.Contains(d.Actions, iv.Action) {
			return fmt.Errorf("world %s: the %s intervention's action %q is not among the actions (%s)", d.Name, iv.Arm, iv.Action, strings.Join(d.Actions, ", "))
		}
	}
	if d.Score != nil {
		if err := d.Score.validate(d.Name); err != nil {
			return err
		}
	}
	if err := d.validateVolatile(); err != nil {
		return err
	}
	if !slices.Contains(d.Cost.Fields, CostSteps) {
		return fmt.Errorf("world %s: cost fields must include %q", d.Name, CostSteps)
	}
	last := -1
	for _, c := range d.Cost.Fields {
		i := slices.Index(CostFields, c)
		if i < 0 {
			return fmt.Errorf("world %s: unknown cost field %q (known: %s)", d.Name, c, strings.Join(CostFields, ", "))
		}
		if i <= last {
			return fmt.Errorf("world %s: cost fields must be listed once each, in the order %s", d.Name, strings.Join(CostFields, ", "))
		}
		last = i
	}
	return nil
}

// Arms lists the treatment arms the world supports, besides the control
// off: aa always, on and placebo when declared, policy when on is.
func (d Declaration) Arms() []string {
	arms := []string{"off"}
	if _, ok := d.Intervention("on"); ok {
		arms = append(arms, "on")
	}
	if _, ok := d.Intervention("placebo"); ok {
		arms = append(arms, "placebo")
	}
	arms = append(arms, "aa")
	if _, ok := d.Intervention("on"); ok {
		arms = append(arms, "policy")
	}
	return arms
}

// ErrUnknownWorld marks a world name no registry knows.
var ErrUnknownWorld = errors.New("unknown world")
