package world

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// ParseValues reads the declared fields of one group (task, features,
// hidden) from vals, a decoded JSON object (numbers as json.Number or
// float64), into dst, in declaration order. Every declared field must be
// present, of its type, and no other: the error names the field as
// where.NAME ("result.forks[0].features.repeat_run is missing: the
// declaration lists it (int)"). An agent's replies and a recorded run's
// features are read by it.
func ParseValues(where string, fields []Field, vals map[string]any, dst []Value) ([]Value, error) {
	for _, f := range fields {
		x, ok := vals[f.Name]
		if !ok {
			return dst, fmt.Errorf("%s.%s is missing: the declaration lists it (%s)", where, f.Name, f.Kind)
		}
		v, err := f.Parse(x)
		if err != nil {
			return dst, fmt.Errorf("%s.%v", where, err)
		}
		dst = append(dst, v)
	}
	if len(vals) > len(fields) {
		var extra []string
		for k := range vals {
			if !slices.ContainsFunc(fields, func(f Field) bool { return f.Name == k }) {
				extra = append(extra, k)
			}
		}
		sort.Strings(extra)
		names := make([]string, len(fields))
		for i, f := range fields {
			names[i] = f.Name
		}
		return dst, fmt.Errorf("%s.%s is not declared (declared: %s)", where, extra[0], strings.Join(names, ", "))
	}
	return dst, nil
}
