package world

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/forklab/forklab/internal/floattext"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// ParamKind is a parameter's type: a scalar Kind, or a list of ints or
// floats.
type ParamKind string

// The parameter kinds.
const (
	ParamBool      ParamKind = "bool"
	ParamInt       ParamKind = "int"
	ParamFloat     ParamKind = "float"
	ParamEnum      ParamKind = "enum"
	ParamIntList   ParamKind = "int_list"
	ParamFloatList ParamKind = "float_list"
)

// Scalar says whether a parameter of kind k holds one value (and so may
// vary in a grid).
func (k ParamKind) Scalar() bool { return k != ParamIntList && k != ParamFloatList }

// Param declares one world parameter.
type Param struct {
	// Name is the parameter's key in spec files, manifests and --param;
	// snake_case. Its flag is --NAME with _ written - (--p-stall).
	Name string `json:"name"`
	// Kind is the parameter's type.
	Kind ParamKind `json:"type"`
	// Default is the value when a spec does not set it, of the Go type
	// Params holds for Kind (bool, int64, float64, string, []int64,
	// []float64).
	Default any `json:"default"`
	// Min and Max bound a number, or each element of a list; nil means
	// unbounded (ints are still bounded by ±2^53, floats must be finite).
	Min *float64 `json:"min,omitempty"`
	Max *float64 `json:"max,omitempty"`
	// Values lists an enum's values.
	Values []string `json:"values,omitempty"`
	// MaxLen bounds a list's length (at least 1 element always); 0 means
	// 2^20.
	MaxLen int `json:"max_len,omitempty"`
	// Description says what the parameter does, with its unit.
	Description string `json:"description"`
}

// Bound returns a pointer to x, for Param.Min and Param.Max.
func Bound(x float64) *float64 { return &x }

// Range describes the valid values of p for error messages: "an integer in
// [1, 1048576]", "a probability in [0, 1]", "one of fast, slow".
func (p Param) Range() string {
	var r string
	switch p.Kind {
	case ParamBool:
		return "true or false"
	case ParamEnum:
		return "one of " + strings.Join(p.Values, ", ")
	case ParamInt, ParamIntList:
		r = "an integer"
	default:
		r = "a number"
	}
	switch {
	case p.Min != nil && p.Max != nil:
		r += fmt.Sprintf(" in [%s, %s]", fmtBound(*p.Min), fmtBound(*p.Max))
	case p.Min != nil:
		r += fmt.Sprintf(" >= %s", fmtBound(*p.Min))
	case p.Max != nil:
		r += fmt.Sprintf(" <= %s", fmtBound(*p.Max))
	}
	if !p.Kind.Scalar() {
		r = fmt.Sprintf("a list of 1 to %d values, each %s", p.maxLen(), r)
	}
	return r
}

func fmtBound(x float64) string {
	if x == math.Trunc(x) && math.Abs(x) < 1e15 {
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

func (p Param) maxLen() int {
	if p.MaxLen > 0 {
		return p.MaxLen
	}
	return 1 << 20
}

func (p Param) validate() error {
	if !namePattern.MatchString(p.Name) {
		return fmt.Errorf("parameter %q: want [a-z][a-z0-9_]*", p.Name)
	}
	switch p.Kind {
	case ParamBool, ParamInt, ParamFloat, ParamEnum, ParamIntList, ParamFloatList:
	default:
		return fmt.Errorf("parameter %s has type %q (known: bool, int, float, enum, int_list, float_list)", p.Name, p.Kind)
	}
	if (p.Kind == ParamEnum) != (len(p.Values) > 0) {
		return fmt.Errorf("parameter %s: only an enum lists values, and an enum must", p.Name)
	}
	if _, err := p.Parse(p.Default); err != nil {
		return fmt.Errorf("parameter %s: its default: %w", p.Name, err)
	}
	return nil
}

// Parse converts x (as JSON or YAML decodes it, or as Params holds it) to
// p's canonical Go type, checking its type and range. The error names the
// parameter and its valid range.
func (p Param) Parse(x any) (any, error) {
	bad := func(got string) error {
		return fmt.Errorf("%s must be %s, got %s", p.Name, p.Range(), got)
	}
	switch p.Kind {
	case ParamBool:
		b, ok := x.(bool)
		if !ok {
			return nil, bad(describe(x))
		}
		return b, nil
	case ParamEnum:
		s, ok := x.(string)
		if !ok || !slices.Contains(p.Values, s) {
			return nil, bad(describe(x))
		}
		return s, nil
	case ParamInt:
		return p.parseInt(x, bad)
	case ParamFloat:
		return p.parseFloat(x, bad)
	}
	// Lists.
	var items []any
	switch l := x.(type) {
	case []any:
		items = l
	case []int64:
		for _, v := range l {
			items = append(items, v)
		}
	case []float64:
		for _, v := range l {
			items = append(items, v)
		}
	case []int:
		for _, v := range l {
			items = append(items, v)
		}
	default:
		return nil, bad(describe(x))
	}
	if len(items) == 0 || len(items) > p.maxLen() {
		return nil, bad(fmt.Sprintf("%d values", len(items)))
	}
	if p.Kind == ParamIntList {
		out := make([]int64, len(items))
		for i, it := range items {
			v, err := p.parseInt(it, bad)
			if err != nil {
				return nil, err
			}
			out[i] = v.(int64)
		}
		return out, nil
	}
	out := make([]float64, len(items))
	for i, it := range items {
		v, err := p.parseFloat(it, bad)
		if err != nil {
			return nil, err
		}
		out[i] = v.(float64)
	}
	return out, nil
}

func (p Param) inRange(v float64) bool {
	return (p.Min == nil || v >= *p.Min) && (p.Max == nil || v <= *p.Max)
}

func (p Param) parseInt(x any, bad func(string) error) (any, error) {
	var v int64
	switch n := x.(type) {
	case int64:
		v = n
	case int:
		v = int64(n)
	case float64:
		if n != math.Trunc(n) || math.Abs(n) > MaxExactInt {
			return nil, bad(describe(x))
		}
		v = int64(n)
	case json.Number:
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil {
			return nil, bad(string(n))
		}
		v = i
	default:
		return nil, bad(describe(x))
	}
	if v > MaxExactInt || v < -MaxExactInt || !p.inRange(float64(v)) {
		return nil, bad(strconv.FormatInt(v, 10))
	}
	return v, nil
}

func (p Param) parseFloat(x any, bad func(string) error) (any, error) {
	var v float64
	switch n := x.(type) {
	case float64:
		v = n
	case int64:
		v = float64(n)
	case int:
		v = float64(n)
	case json.Number:
		f, err := floattext.Parse(string(n))
		if errors.Is(err, floattext.ErrNotFloat64) {
			// 1e-400 would read as 0: refused, not rounded.
			return nil, fmt.Errorf("%s must be %s; %s", p.Name, p.Range(), strings.TrimSuffix(err.Error(), " ("+floattext.ErrNotFloat64.Error()+")"))
		}
		if err != nil {
			return nil, bad(string(n))
		}
		v = f
	default:
		return nil, bad(describe(x))
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || !p.inRange(v) {
		return nil, bad(strconv.FormatFloat(v, 'g', -1, 64))
	}
	return v, nil
}

func describe(x any) string {
	switch v := x.(type) {
	case string:
		return strconv.Quote(v)
	case nil:
		return "nothing"
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	if b, err := json.Marshal(x); err == nil {
		return string(b)
	}
	return fmt.Sprint(x)
}

// ParseText reads a parameter from command-line text (--param key=value,
// --p-stall 0.2): true/false, a number, an enum value, or a list — its
// values comma-separated, with or without the brackets of a JSON array
// ("2,5" and "[2,5]" are the same list); in an int list "none" stands for
// 0 (the counter's freeze_at). Every subcommand reads --param with it.
func (p Param) ParseText(s string) (any, error) {
	s = strings.TrimSpace(s)
	switch p.Kind {
	case ParamBool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, fmt.Errorf("%s must be %s, got %q", p.Name, p.Range(), s)
		}
		return b, nil
	case ParamEnum:
		if u, err := strconv.Unquote(s); err == nil && strings.HasPrefix(s, `"`) {
			s = u // a JSON string
		}
		return p.Parse(s)
	case ParamInt, ParamFloat:
		n := json.Number(s)
		if _, err := n.Float64(); err != nil {
			return nil, fmt.Errorf("%s must be %s, got %q", p.Name, p.Range(), s)
		}
		return p.Parse(n)
	}
	list := s
	if strings.HasPrefix(list, "[") && strings.HasSuffix(list, "]") {
		list = strings.TrimSpace(list[1 : len(list)-1])
	}
	var items []any
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if p.Kind == ParamIntList && strings.EqualFold(f, "none") {
			items = append(items, int64(0))
			continue
		}
		n := json.Number(f)
		if _, err := n.Float64(); err != nil {
			return nil, fmt.Errorf("%s must be %s, written comma-separated (2,5 or [2,5]), got %q", p.Name, p.Range(), s)
		}
		items = append(items, n)
	}
	return p.Parse(items)
}

// ParseParamText reads parameter settings written "key=value", as every
// subcommand's --param takes them, against d: each key a declared
// parameter, each value read by its Param.ParseText. It returns the
// values by name, in their canonical types (for Resolve); the error names
// the setting and what was wrong. A key given twice is refused when its
// values differ (the last would win without a word); given twice with one
// value it is the same setting, and taken.
func (d Declaration) ParseParamText(kvs []string) (map[string]any, error) {
	out := make(map[string]any, len(kvs))
	given := make(map[string]string, len(kvs)) // the item that set each key
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("--param %q: want key=value, e.g. --param p_stall=0.2 or --param k_choices=2,5", kv)
		}
		k = strings.TrimSpace(k)
		p, found := d.Param(k)
		if !found {
			return nil, fmt.Errorf("--param %s: world %s has no parameter %q (%s)", kv, d.Name, k, d.ParamsText())
		}
		x, err := p.ParseText(v)
		if err != nil {
			return nil, fmt.Errorf("--param %s: %w", kv, err)
		}
		if prev, ok := out[k]; ok && !reflect.DeepEqual(prev, x) {
			return nil, fmt.Errorf("--param %s is given twice, to different values (%s and %s): give it once", k, given[k], kv)
		}
		out[k], given[k] = x, kv
	}
	return out, nil
}

// Params are one configuration's parameter values, keyed by name, in the
// canonical Go types of their kinds (bool, int64, float64, string, []int64,
// []float64). Resolve makes them; encoding/json writes them with keys
// sorted, so equal Params encode to equal bytes.
type Params map[string]any

// Param returns the declared parameter named name.
func (d Declaration) Param(name string) (Param, bool) {
	for _, p := range d.Params {
		if p.Name == name {
			return p, true
		}
	}
	return Param{}, false
}

// ParamNames lists the parameters' names, in declaration order.
func (d Declaration) ParamNames() []string {
	names := make([]string, len(d.Params))
	for i, p := range d.Params {
		names[i] = p.Name
	}
	return names
}

// ParamsText words the declaration's parameters for a message about an
// unknown one: "its parameters: a, b", or "it declares no parameters".
func (d Declaration) ParamsText() string {
	if len(d.Params) == 0 {
		return "it declares no parameters"
	}
	return "its parameters: " + strings.Join(d.ParamNames(), ", ")
}

// Resolve checks raw parameter values against the declaration and fills in
// the defaults: an unknown name is an error naming the known ones, a value
// of the wrong type or out of range an error naming its valid range.
func (d Declaration) Resolve(raw map[string]any) (Params, error) {
	out := Params{}
	for k, v := range raw {
		p, ok := d.Param(k)
		if !ok {
			return nil, fmt.Errorf("world %s has no parameter %q (%s)", d.Name, k, d.ParamsText())
		}
		c, err := p.Parse(v)
		if err != nil {
			return nil, err
		}
		out[k] = c
	}
	for _, p := range d.Params {
		if _, ok := out[p.Name]; !ok {
			c, err := p.Parse(p.Default)
			if err != nil {
				return nil, fmt.Errorf("world %s: parameter %s's default: %w", d.Name, p.Name, err)
			}
			out[p.Name] = c
		}
	}
	return out, nil
}

// Int returns an int parameter (0 if missing or of another kind: Resolve
// first).
func (p Params) Int(name string) int64 { v, _ := p[name].(int64); return v }

// Float returns a float parameter.
func (p Params) Float(name string) float64 { v, _ := p[name].(float64); return v }

// Bool returns a bool parameter.
func (p Params) Bool(name string) bool { v, _ := p[name].(bool); return v }

// String returns an enum parameter.
func (p Params) String(name string) string { v, _ := p[name].(string); return v }

// Ints returns an int list parameter.
func (p Params) Ints(name string) []int64 { v, _ := p[name].([]int64); return v }

// Floats returns a float list parameter.
func (p Params) Floats(name string) []float64 { v, _ := p[name].([]float64); return v }

// Clone returns a copy of p whose lists are copies too.
func (p Params) Clone() Params {
	out := make(Params, len(p))
	for k, v := range p {
		switch l := v.(type) {
		case []int64:
			out[k] = slices.Clone(l)
		case []float64:
			out[k] = slices.Clone(l)
		default:
			out[k] = v
		}
	}
	return out
}

// Text returns a parameter's canonical text, as the params table's
// value_text column holds it: true/false, a decimal integer, the shortest
// round-tripping float, the enum value, or a list as JSON ([0,0,1,2]).
func (p Params) Text(name string) string {
	switch v := p[name].(type) {
	case bool:
		return strconv.FormatBool(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case string:
		return v
	}
	b, _ := json.Marshal(p[name])
	return string(b)
}

// UnmarshalJSON reads Params as raw JSON values (numbers as float64);
// Resolve converts them to their canonical types.
func (p *Params) UnmarshalJSON(b []byte) error {
	var m map[string]any
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return err
	}
	*p = Params(m)
	return nil
}
