// Package policy is the guard policy: a small, human-readable rule over a
// checkpoint's pre-decision features that says when to fire the recovery
// (the seed's should_recover(state), milestone 6).
//
// A rule is a conjunction of conditions, each comparing one feature with a
// value. The empty conjunction fires always; Never fires never. In a file:
//
//	{
//	  "policy_version": 2,
//	  "world": "counter",
//	  "world_version": "2",
//	  "all": [{"feature": "same_obs", "op": "=", "value": true}]
//	}
package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/forklab/forklab/internal/jsondup"
	"github.com/forklab/forklab/pipeline/world"
)

// Version is the rule file layout version. Version 2 names the world (and
// its version) the rule was searched on, and compares any declared feature.
const Version = 2

// Ops lists the comparison operators. Boolean and enum features allow = and
// != only.
var Ops = []string{"=", "!=", "<", "<=", ">", ">="}

// Condition compares one feature with a value: a JSON boolean for a bool
// feature, a number for an int or float one, a string for an enum.
type Condition struct {
	Feature string `json:"feature"`
	Op      string `json:"op"`
	Value   any    `json:"value"`
}

// Rule fires when every condition in All holds, or never if Never is set.
type Rule struct {
	Version int `json:"policy_version"`
	// World and WorldVersion name the world whose features the rule reads;
	// a sweep of another world (or version) refuses the rule.
	World        string `json:"world"`
	WorldVersion string `json:"world_version"`
	// ConfigID and ForkStep say which configuration and fork step of the
	// sweep the rule was searched on (informational; nil when not from a
	// search).
	ConfigID *int        `json:"config_id,omitempty"`
	ForkStep *int        `json:"fork_step,omitempty"`
	Never    bool        `json:"never,omitempty"`
	All      []Condition `json:"all"`
	// Note is free text for people: where the rule came from.
	Note string `json:"note,omitempty"`
}

// Validate checks the rule's own shape: its version, never without
// conditions, known operators. Check checks it against a world.
func (r Rule) Validate() error {
	if r.Version != Version {
		return fmt.Errorf("policy_version is %d, this forklab reads %d", r.Version, Version)
	}
	if r.World == "" {
		return fmt.Errorf("the rule names no world (key \"world\")")
	}
	if r.Never && len(r.All) > 0 {
		return fmt.Errorf("a rule with never set cannot also list conditions")
	}
	for i, c := range r.All {
		if !slices.Contains(Ops, c.Op) {
			return fmt.Errorf("condition %d: unknown operator %q (known: %s)", i+1, c.Op, strings.Join(Ops, " "))
		}
	}
	return nil
}

// Check reports a rule that cannot run on world d: another world or world
// version, an unknown feature (naming the known ones), a value of the wrong
// type, an operator the feature's type does not allow.
func (r Rule) Check(d world.Declaration) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if r.World != d.Name {
		return fmt.Errorf("the rule is for world %s, not %s", r.World, d.Name)
	}
	if r.WorldVersion != d.Version {
		return fmt.Errorf("the rule is for world %s version %s, this sweep plays version %s: search it again", r.World, r.WorldVersion, d.Version)
	}
	for i, c := range r.All {
		f, _, ok := d.Feature(c.Feature)
		if !ok {
			return fmt.Errorf("condition %d: unknown feature %q (world %s's features: %s)", i+1, c.Feature, d.Name, strings.Join(d.FeatureNames(), ", "))
		}
		if (f.Kind == world.Bool || f.Kind == world.Enum) && c.Op != "=" && c.Op != "!=" {
			return fmt.Errorf("condition %d: %s is %s, use = or !=, not %s", i+1, c.Feature, f.Kind, c.Op)
		}
		if _, err := value(f, c.Value); err != nil {
			return fmt.Errorf("condition %d: %w", i+1, err)
		}
	}
	return nil
}

// value reads a condition's value as feature f's type.
func value(f world.Field, x any) (world.Value, error) {
	switch f.Kind {
	case world.Bool:
		if b, ok := x.(bool); ok {
			return world.BoolValue(b), nil
		}
		return world.Value{}, fmt.Errorf("%s is bool: compare it with true or false, not %v", f.Name, x)
	case world.Enum:
		if s, ok := x.(string); ok && slices.Contains(f.Values, s) {
			return world.EnumValue(s), nil
		}
		return world.Value{}, fmt.Errorf("%s is an enum: compare it with one of %s, not %v", f.Name, strings.Join(f.Values, ", "), x)
	}
	n, ok := x.(float64)
	if !ok {
		return world.Value{}, fmt.Errorf("%s is a number: compare it with a number, not %v", f.Name, x)
	}
	return world.FloatValue(n), nil
}

// Compile returns the rule's should_recover for world d: a function of a
// checkpoint's features, in declaration order, that reports whether the
// rule fires. It fails as Check does.
func (r Rule) Compile(d world.Declaration) (func(features []world.Value) bool, error) {
	if err := r.Check(d); err != nil {
		return nil, err
	}
	if r.Never {
		return func([]world.Value) bool { return false }, nil
	}
	type cond struct {
		i    int
		kind world.Kind
		op   string
		v    world.Value
		num  float64
	}
	conds := make([]cond, len(r.All))
	for k, c := range r.All {
		f, i, _ := d.Feature(c.Feature)
		v, _ := value(f, c.Value)
		num := v.F
		if f.Kind == world.Bool {
			num = float64(v.I)
		}
		conds[k] = cond{i: i, kind: f.Kind, op: c.Op, v: v, num: num}
	}
	return func(fs []world.Value) bool {
		for _, c := range conds {
			x := fs[c.i]
			if x.Null {
				return false
			}
			if c.kind == world.Enum {
				if (x.S == c.v.S) != (c.op == "=") {
					return false
				}
				continue
			}
			if !compare(x.Number(c.kind), c.op, c.num) {
				return false
			}
		}
		return true
	}, nil
}

func compare(x float64, op string, v float64) bool {
	switch op {
	case "=":
		return x == v
	case "!=":
		return x != v
	case "<":
		return x < v
	case "<=":
		return x <= v
	case ">":
		return x > v
	case ">=":
		return x >= v
	}
	return false
}

// String renders the rule for people: "same_obs = true AND repeat_run >= 2",
// "always" or "never".
func (r Rule) String() string {
	if r.Never {
		return "never"
	}
	if len(r.All) == 0 {
		return "always"
	}
	parts := make([]string, len(r.All))
	for i, c := range r.All {
		parts[i] = fmt.Sprintf("%s %s %v", c.Feature, c.Op, c.Value)
	}
	return strings.Join(parts, " AND ")
}

// Decode reads a rule strictly: unknown keys, trailing data and invalid
// rules are errors.
func Decode(b []byte) (Rule, error) {
	var r Rule
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil {
		return r, fmt.Errorf("malformed policy JSON: %w", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return r, fmt.Errorf("malformed policy JSON: trailing data after the rule")
	}
	if err := jsondup.Check(b); err != nil {
		return r, fmt.Errorf("malformed policy JSON: %w", err)
	}
	return r, r.Validate()
}

// ReadFile reads and validates a rule file.
func ReadFile(path string) (Rule, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Rule{}, fmt.Errorf("read policy: %w", err)
	}
	r, err := Decode(b)
	if err != nil {
		return r, fmt.Errorf("policy %s: %w", path, err)
	}
	return r, nil
}

// Encode renders the rule as indented JSON with a trailing newline. The
// operators stay as people write them ("op": ">="): encoding/json would
// escape <, > and & for HTML ("\u003e="), which reads as noise in a file
// meant to be read and edited.
func (r Rule) Encode() ([]byte, error) {
	if r.All == nil {
		r.All = []Condition{}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	err := enc.Encode(r)
	return b.Bytes(), err
}
