package sweep

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/forklab/forklab/pipeline/analysis/policy"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/worlds/counter"
	yaml "go.yaml.in/yaml/v3"
)

// MaxSeed bounds seeds so they fit the int64 seed column.
const MaxSeed = math.MaxInt64

// Range is a half-open range of seeds [Start, End), written "START:END" as
// in Python's range; a lone "N" means "0:N".
type Range struct{ Start, End uint64 }

// Len is the number of seeds in r.
func (r Range) Len() uint64 { return r.End - r.Start }

// String returns "START:END".
func (r Range) String() string { return fmt.Sprintf("%d:%d", r.Start, r.End) }

// ParseRange parses "START:END" or "N". Both bounds are non-negative
// integers below 2^63 and START < END.
func ParseRange(s string) (Range, error) {
	lo, hi, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		lo, hi = "0", lo
	}
	start, err1 := strconv.ParseUint(strings.TrimSpace(lo), 10, 63)
	end, err2 := strconv.ParseUint(strings.TrimSpace(hi), 10, 63)
	if err1 != nil || err2 != nil {
		return Range{}, fmt.Errorf("seed range %q is malformed: want START:END with integers 0 <= START < END < 2^63, e.g. 0:300", s)
	}
	if start >= end {
		return Range{}, fmt.Errorf("seed range %q is empty: START must be below END, e.g. 0:300", s)
	}
	return Range{start, end}, nil
}

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
// result is sorted and free of repeats.
func ParseSteps(s string) ([]int, error) {
	var steps []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		lo, hi, isRange := strings.Cut(f, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(strings.TrimSpace(hi))
		}
		if err != nil || f == "" {
			return nil, fmt.Errorf("fork steps %q are malformed: want integers or ranges like 3, 1,2,3 or 1-4", s)
		}
		if a < 1 || b < 1 {
			return nil, fmt.Errorf("fork step %d is below 1: the fork must come after at least one step", min(a, b))
		}
		if b < a || b-a > 10000 {
			return nil, fmt.Errorf("fork step range %q must go upwards and span at most 10000 steps", f)
		}
		for x := a; x <= b; x++ {
			steps = append(steps, x)
		}
	}
	slices.Sort(steps)
	return slices.Compact(steps), nil
}

// Spec says everything a sweep does; it is stored in the results' manifest
// so that a results directory always says how it was made. It is read from
// flags, or from a JSON or YAML spec file with the same keys.
type Spec struct {
	// World names the world; "counter" is the only one so far.
	World string `json:"world"`
	// Seeds is the seed range.
	Seeds Range `json:"seeds"`
	// ForkAt lists the fork steps, ascending.
	ForkAt []int `json:"fork_at"`
	// Arms lists the arms, control off included.
	Arms []fork.Arm `json:"arms"`
	// Replicas is the number of forks per checkpoint and arm, voted by
	// majority; 1 for a greedy model.
	Replicas int `json:"replicas"`
	// Params are the world's parameters.
	Params counter.Params `json:"params"`
	// Model is the fake model's noise.
	Model fork.Model `json:"model"`
	// Grid maps scalar parameter names (GridKeys) to lists of values;
	// the sweep runs every combination, each as one configuration whose
	// values become columns of tasks and pairs.
	Grid map[string][]float64 `json:"grid,omitempty"`
	// Policy is the guard rule of the policy arm.
	Policy *policy.Rule `json:"policy,omitempty"`
}

// DefaultSpec is the seed's experiment: seeds 0:300, fork step 3, arms off
// and on, one replica, greedy model (temperature 0; half of any departing
// turns would call no tool), the seed's world.
func DefaultSpec() Spec {
	return Spec{World: counter.Name, Seeds: Range{0, 300}, ForkAt: []int{3},
		Arms: []fork.Arm{fork.Off, fork.On}, Replicas: 1, Params: counter.Default(),
		Model: fork.Model{NoTool: 0.5}}
}

// GridKeys are the parameters a grid may vary.
var GridKeys = []string{"target", "base_budget", "p_stall", "p_obs_noise", "p_refresh_fail", "temperature", "no_tool"}

// Config is one point of a spec's grid.
type Config struct {
	ID     int            `json:"config_id"`
	Params counter.Params `json:"params"`
	Model  fork.Model     `json:"model"`
}

// Configs expands the grid into configurations, in a fixed order: keys
// sorted by name, the last key varying fastest. A spec without a grid has
// one configuration, ID 0.
func (s Spec) Configs() []Config {
	keys := make([]string, 0, len(s.Grid))
	for k := range s.Grid {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	configs := []Config{{Params: s.Params, Model: s.Model}}
	for _, k := range keys {
		var next []Config
		for _, c := range configs {
			for _, v := range s.Grid[k] {
				c2 := c
				c2.Params.Slack = slices.Clone(c.Params.Slack)
				c2.Params.FreezeAt = slices.Clone(c.Params.FreezeAt)
				setParam(&c2, k, v)
				next = append(next, c2)
			}
		}
		configs = next
	}
	for i := range configs {
		configs[i].ID = i
	}
	return configs
}

func setParam(c *Config, key string, v float64) {
	switch key {
	case "target":
		c.Params.Target = int(v)
	case "base_budget":
		c.Params.BaseBudget = int(v)
	case "p_stall":
		c.Params.PStall = v
	case "p_obs_noise":
		c.Params.PObsNoise = v
	case "p_refresh_fail":
		c.Params.PRefreshFail = v
	case "temperature":
		c.Model.Temperature = v
	case "no_tool":
		c.Model.NoTool = v
	}
}

// Validate checks the spec as a whole and names the offending field.
func (s Spec) Validate() error {
	if s.World != counter.Name {
		return fmt.Errorf("world %q is unknown (known: counter)", s.World)
	}
	if s.Seeds.Len() == 0 {
		return errors.New("seeds: the range is empty")
	}
	if len(s.ForkAt) == 0 {
		return errors.New("fork_at: list at least one fork step")
	}
	if !slices.IsSorted(s.ForkAt) || s.ForkAt[0] < 1 {
		return fmt.Errorf("fork_at: steps must be at least 1 and ascending, got %v", s.ForkAt)
	}
	if len(s.Arms) < 2 || !slices.Contains(s.Arms, fork.Off) {
		return errors.New("arms: list the control off and at least one treatment arm")
	}
	if _, err := fork.ParseArms(joinArms(s.Arms)); err != nil {
		return fmt.Errorf("arms: %w", err)
	}
	if slices.Contains(s.Arms, fork.Policy) != (s.Policy != nil) {
		if s.Policy == nil {
			return errors.New("arms: the policy arm needs a guard rule (--policy FILE)")
		}
		return errors.New("policy: a guard rule was given but the arms do not include policy")
	}
	if s.Policy != nil {
		if err := s.Policy.Validate(); err != nil {
			return fmt.Errorf("policy: %w", err)
		}
	}
	if s.Replicas < 1 || s.Replicas > 1000 {
		return fmt.Errorf("replicas: must be between 1 and 1000, got %d", s.Replicas)
	}
	for k, vs := range s.Grid {
		if !slices.Contains(GridKeys, k) {
			return fmt.Errorf("grid: unknown parameter %q (known: %s)", k, strings.Join(GridKeys, ", "))
		}
		if len(vs) == 0 {
			return fmt.Errorf("grid: %s lists no values", k)
		}
		if (k == "target" || k == "base_budget") && slices.ContainsFunc(vs, func(v float64) bool { return v != math.Trunc(v) }) {
			return fmt.Errorf("grid: %s values must be integers", k)
		}
	}
	configs := s.Configs()
	if len(configs) > 10000 {
		return fmt.Errorf("grid: %d configurations is more than the limit of 10000", len(configs))
	}
	for _, c := range configs {
		if err := c.Params.Validate(); err != nil {
			return fmt.Errorf("params (config %d): %w", c.ID, err)
		}
		if err := c.Model.Validate(); err != nil {
			return fmt.Errorf("model (config %d): %w", c.ID, err)
		}
		if last := s.ForkAt[len(s.ForkAt)-1]; last > c.Params.MaxBudget() {
			return fmt.Errorf("fork_at: step %d is past the largest budget a task can draw (%d): no run reaches it", last, c.Params.MaxBudget())
		}
	}
	return nil
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
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		if err := yaml.Unmarshal(b, &v); err != nil {
			return base, fmt.Errorf("spec %s: %w", path, err)
		}
		v = normalizeYAML(v)
	case ".json":
		if err := json.Unmarshal(b, &v); err != nil {
			return base, fmt.Errorf("spec %s: %v", path, strings.TrimPrefix(err.Error(), "json: "))
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
	if b, err = json.Marshal(top); err != nil {
		return base, fmt.Errorf("spec %s: %w", path, err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	s := base
	if err := d.Decode(&s); err != nil {
		return base, fmt.Errorf("spec %s: %s", path, specError(err))
	}
	slices.Sort(s.ForkAt)
	return s, nil
}

// specError words a decoding error in the spec's own terms: its keys, not
// Go's types.
func specError(err error) string {
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		return fmt.Sprintf("key %s: a %s cannot be read as %s", typ.Field, typ.Value, kindOf(typ.Type.Kind().String()))
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	return strings.Replace(msg, "unknown field", "unknown key", 1)
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
