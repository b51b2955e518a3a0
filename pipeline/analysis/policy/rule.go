// Package policy is the guard policy: a small, human-readable rule over a
// checkpoint's pre-decision features that says when to fire the recovery
// (the seed's should_recover(state), milestone 6).
//
// A rule is a conjunction of conditions, each comparing one feature with a
// value. The empty conjunction fires always; Never fires never. In a file:
//
//	{
//	  "policy_version": 1,
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

	"github.com/forklab/forklab/pipeline/world"
)

// Version is the rule file layout version.
const Version = 1

// Features maps each feature name to whether it is boolean (true) or
// numeric (false). The names are the feature columns of the checkpoints and
// pairs tables (schemas.FeatureNames).
var Features = map[string]bool{
	"same_obs":    true,
	"repeat_run":  false,
	"obs_value":   false,
	"steps_used":  false,
	"budget_left": false,
}

// Ops lists the comparison operators. Boolean features allow = and != only.
var Ops = []string{"=", "!=", "<", "<=", ">", ">="}

// Condition compares one feature with a value: a JSON boolean for boolean
// features, a number for numeric ones.
type Condition struct {
	Feature string `json:"feature"`
	Op      string `json:"op"`
	Value   any    `json:"value"`
}

// Rule fires when every condition in All holds, or never if Never is set.
type Rule struct {
	Version int         `json:"policy_version"`
	Never   bool        `json:"never,omitempty"`
	All     []Condition `json:"all"`
	// Note is free text for people: where the rule came from.
	Note string `json:"note,omitempty"`
}

// Validate reports an unknown feature or operator, a value of the wrong
// type, or a wrong version.
func (r Rule) Validate() error {
	if r.Version != Version {
		return fmt.Errorf("policy_version is %d, this forklab reads %d", r.Version, Version)
	}
	if r.Never && len(r.All) > 0 {
		return fmt.Errorf("a rule with never set cannot also list conditions")
	}
	for i, c := range r.All {
		isBool, ok := Features[c.Feature]
		if !ok {
			return fmt.Errorf("condition %d: unknown feature %q (known: %s)", i+1, c.Feature, strings.Join(featureNames(), ", "))
		}
		if !slices.Contains(Ops, c.Op) {
			return fmt.Errorf("condition %d: unknown operator %q (known: %s)", i+1, c.Op, strings.Join(Ops, " "))
		}
		switch v := c.Value.(type) {
		case bool:
			if !isBool {
				return fmt.Errorf("condition %d: %s is numeric, compare it with a number, not %v", i+1, c.Feature, v)
			}
			if c.Op != "=" && c.Op != "!=" {
				return fmt.Errorf("condition %d: %s is boolean, use = or !=, not %s", i+1, c.Feature, c.Op)
			}
		case float64:
			if isBool {
				return fmt.Errorf("condition %d: %s is boolean, compare it with true or false, not %v", i+1, c.Feature, v)
			}
		default:
			return fmt.Errorf("condition %d: value %v of %s must be a boolean or a number", i+1, c.Value, c.Feature)
		}
	}
	return nil
}

func featureNames() []string {
	names := make([]string, 0, len(Features))
	for k := range Features {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// Fires evaluates the rule on a checkpoint's features: should_recover.
// The rule must be valid.
func (r Rule) Fires(f world.Features) bool {
	if r.Never {
		return false
	}
	for _, c := range r.All {
		if !c.holds(f) {
			return false
		}
	}
	return true
}

func (c Condition) holds(f world.Features) bool {
	var x, v float64
	switch c.Feature {
	case "same_obs":
		x = b2f(f.SameObs)
	case "repeat_run":
		x = float64(f.RepeatRun)
	case "obs_value":
		x = float64(f.ObsValue)
	case "steps_used":
		x = float64(f.StepsUsed)
	case "budget_left":
		x = float64(f.BudgetLeft)
	}
	switch t := c.Value.(type) {
	case bool:
		v = b2f(t)
	case float64:
		v = t
	}
	switch c.Op {
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

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
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

// Encode renders the rule as indented JSON with a trailing newline.
func (r Rule) Encode() ([]byte, error) {
	if r.All == nil {
		r.All = []Condition{}
	}
	b, err := json.MarshalIndent(r, "", "  ")
	return append(b, '\n'), err
}
