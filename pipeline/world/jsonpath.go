package world

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// PathStep is one step into a JSON value: an object key, or an array
// index. In a pattern (JSONPath), Any matches every key or every index.
type PathStep struct {
	Key   string
	Index int
	// IsIndex: the step is into an array (Index), not an object (Key).
	IsIndex bool
	// Any: in a pattern, any key ("*") or any index ("[*]").
	Any bool
}

// String writes the step as a path writes it after what precedes it:
// ".key", "[3]", ".*", "[*]".
func (s PathStep) String() string {
	switch {
	case s.IsIndex && s.Any:
		return "[*]"
	case s.IsIndex:
		return "[" + strconv.Itoa(s.Index) + "]"
	case s.Any:
		return ".*"
	}
	return "." + s.Key
}

// PathText writes concrete steps as a path: forks[0].checkpoint.ts.
func PathText(steps []PathStep) string {
	var b strings.Builder
	for _, s := range steps {
		b.WriteString(s.String())
	}
	return strings.TrimPrefix(b.String(), ".")
}

// JSONPath is a pattern of places in a JSON value, as a declaration's
// volatile lists them (docs/agent-protocol.md, "The world declaration"):
// keys joined by ".", array indices [N] or [*], and * for any object key,
// e.g. forks[*].checkpoint.channel_values.messages[*].kwargs.id.
type JSONPath []PathStep

// jsonPathSyntax is a JSONPath's text: keys (no ".", "[", "]" or "*"
// inside) or *, each followed by any indices.
var jsonPathSyntax = regexp.MustCompile(`^(?:\*|[^.\[\]*]+)(?:\[(?:\d+|\*)\])*(?:\.(?:\*|[^.\[\]*]+)(?:\[(?:\d+|\*)\])*)*$`)

// ParseJSONPath reads a path pattern; the error says what a path is.
func ParseJSONPath(s string) (JSONPath, error) {
	if !jsonPathSyntax.MatchString(s) {
		return nil, fmt.Errorf("%q is not a path: keys joined by '.', array indices [N] or [*], * for any key (e.g. forks[*].checkpoint.ts)", s)
	}
	var p JSONPath
	for _, part := range strings.Split(s, ".") {
		key, rest, _ := strings.Cut(part, "[")
		if key == "*" {
			p = append(p, PathStep{Any: true})
		} else {
			p = append(p, PathStep{Key: key})
		}
		for rest != "" {
			idx, after, _ := strings.Cut(rest, "]")
			if idx == "*" {
				p = append(p, PathStep{IsIndex: true, Any: true})
			} else {
				n, err := strconv.Atoi(idx)
				if err != nil {
					return nil, fmt.Errorf("%q: index %s is too large", s, idx)
				}
				p = append(p, PathStep{IsIndex: true, Index: n})
			}
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return p, nil
}

// Match says whether the concrete steps are the place p names: as many
// steps, each matching (a key by name or *, an index by number or [*]).
func (p JSONPath) Match(steps []PathStep) bool {
	if len(p) != len(steps) {
		return false
	}
	for i, s := range p {
		c := steps[i]
		if s.IsIndex != c.IsIndex || !s.Any && (s.Key != c.Key || s.Index != c.Index) {
			return false
		}
	}
	return true
}

// validateVolatile checks the declaration's volatile paths: each a
// JSONPath into start's result, which begins with task or forks.
func (d Declaration) validateVolatile() error {
	for i, v := range d.Volatile {
		p, err := ParseJSONPath(v)
		if err != nil {
			return fmt.Errorf("world %s: volatile[%d]: %v", d.Name, i, err)
		}
		if p[0].Any || p[0].Key != "task" && p[0].Key != "forks" {
			return fmt.Errorf("world %s: volatile[%d] %q: a path into start's result begins with task or forks (did you mean forks[*].%s?)", d.Name, i, v, v)
		}
	}
	return nil
}
