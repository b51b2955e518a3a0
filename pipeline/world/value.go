package world

import (
	"encoding/json"
	"fmt"
	"github.com/forklab/forklab/internal/floattext"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Value is one declared value (a feature, a hidden truth, a task draw) of
// the Kind its Field declares; the declaration, not the value, carries the
// kind. Bool and Int use I (a bool as 0 or 1), Float uses F, Enum uses S.
// Null marks a missing value of a Nullable field, or any value of a run
// that failed.
type Value struct {
	I    int64
	F    float64
	S    string
	Null bool
}

// BoolValue, IntValue, FloatValue and EnumValue make values of each kind;
// NullValue is the missing value.
func BoolValue(b bool) Value {
	if b {
		return Value{I: 1}
	}
	return Value{}
}

// IntValue makes an int value.
func IntValue(i int64) Value { return Value{I: i} }

// FloatValue makes a float value.
func FloatValue(f float64) Value { return Value{F: f} }

// EnumValue makes an enum value.
func EnumValue(s string) Value { return Value{S: s} }

// NullValue is a missing value.
func NullValue() Value { return Value{Null: true} }

// Bool returns a bool value.
func (v Value) Bool() bool { return v.I != 0 }

// Number returns v as a number for comparisons: a bool as 0 or 1, an int
// or float as itself. It is NaN for enums and nulls.
func (v Value) Number(k Kind) float64 {
	if v.Null {
		return math.NaN()
	}
	switch k {
	case Bool, Int:
		return float64(v.I)
	case Float:
		return v.F
	}
	return math.NaN()
}

// Text returns v's canonical text, as the features view's value_text
// column holds it: true/false, a decimal integer, the shortest float that
// round-trips ('g'), the enum value; "" for null.
func (v Value) Text(k Kind) string {
	if v.Null {
		return ""
	}
	switch k {
	case Bool:
		return strconv.FormatBool(v.I != 0)
	case Int:
		return strconv.FormatInt(v.I, 10)
	case Float:
		return strconv.FormatFloat(v.F, 'g', -1, 64)
	}
	return v.S
}

// JSON returns v as a JSON-ready Go value: bool, int64, float64, string or
// nil.
func (v Value) JSON(k Kind) any {
	if v.Null {
		return nil
	}
	switch k {
	case Bool:
		return v.I != 0
	case Int:
		return v.I
	case Float:
		return v.F
	}
	return v.S
}

// MaxExactInt is 2^53, the bound of an int value (a task draw, feature,
// hidden field, parameter or cost count): every integer up to it in
// magnitude is exact as a JSON number read as a double, as JavaScript,
// DuckDB's JSON functions and many BI tools read numbers. Task seeds are
// the one exception (docs/agent-protocol.md, "start").
const MaxExactInt = 1 << 53

// Parse reads a value of field f from decoded JSON (bool, float64,
// json.Number, string or nil). It fails, naming the field, on a value of
// the wrong type, a non-integral or out-of-range int, a non-finite float,
// an enum value not declared, or a null for a field that is not Nullable.
func (f Field) Parse(x any) (Value, error) {
	if x == nil {
		if f.Nullable {
			return NullValue(), nil
		}
		return Value{}, fmt.Errorf("%s is null but is not declared nullable", f.Name)
	}
	switch f.Kind {
	case Bool:
		if b, ok := x.(bool); ok {
			return BoolValue(b), nil
		}
	case Int:
		bad := func(got string) error {
			return fmt.Errorf("%s must be an integer within ±2^53, got %s: a JSON number beyond that is not exact in parsers that read numbers as doubles (JavaScript, DuckDB's JSON, many BI tools)", f.Name, got)
		}
		var i int64
		switch n := x.(type) {
		case json.Number:
			v, err := strconv.ParseInt(string(n), 10, 64)
			if err != nil {
				if strings.Trim(strings.TrimPrefix(string(n), "-"), "0123456789") == "" {
					return Value{}, bad(string(n)) // an integer beyond 64 bits
				}
				return Value{}, fmt.Errorf("%s must be an integer, got %s", f.Name, n)
			}
			i = v
		case float64:
			if n != math.Trunc(n) {
				return Value{}, fmt.Errorf("%s must be an integer, got %v", f.Name, n)
			}
			if math.Abs(n) > MaxExactInt {
				return Value{}, bad(strconv.FormatFloat(n, 'g', -1, 64))
			}
			i = int64(n)
		case int64:
			i = n
		case int:
			i = int64(n)
		default:
			return Value{}, fmt.Errorf("%s must be a %s, got %s", f.Name, f.Kind, jsonType(x))
		}
		if i > MaxExactInt || i < -MaxExactInt {
			return Value{}, bad(strconv.FormatInt(i, 10))
		}
		return IntValue(i), nil
	case Float:
		var v float64
		switch n := x.(type) {
		case json.Number:
			var err error
			if v, err = floattext.Parse(string(n)); err != nil {
				return Value{}, fmt.Errorf("%s must be a finite number a float64 holds, got %s", f.Name, n)
			}
		case float64:
			v = n
		case int64:
			v = float64(n)
		case int:
			v = float64(n)
		default:
			return Value{}, fmt.Errorf("%s must be a number, got %s", f.Name, jsonType(x))
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return Value{}, fmt.Errorf("%s must be finite, got %v", f.Name, v)
		}
		return FloatValue(v), nil
	case Enum:
		if s, ok := x.(string); ok {
			if !slices.Contains(f.Values, s) {
				return Value{}, fmt.Errorf("%s is %q, not one of its declared values (%v)", f.Name, s, f.Values)
			}
			return EnumValue(s), nil
		}
	}
	return Value{}, fmt.Errorf("%s must be a %s, got %s", f.Name, f.Kind, jsonType(x))
}

func jsonType(x any) string {
	switch x.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64, json.Number, int, int64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", x)
}

// Check reports a value that does not fit its field: an enum value not
// declared, a non-finite float, a null in a field not nullable. Built-in
// worlds are checked by tests; agents' replies by the protocol client.
func (f Field) Check(v Value) error {
	if v.Null {
		if !f.Nullable {
			return fmt.Errorf("%s is null but is not declared nullable", f.Name)
		}
		return nil
	}
	switch f.Kind {
	case Bool:
		if v.I != 0 && v.I != 1 {
			return fmt.Errorf("%s: bool stored as %d", f.Name, v.I)
		}
	case Float:
		if math.IsNaN(v.F) || math.IsInf(v.F, 0) {
			return fmt.Errorf("%s must be finite, got %v", f.Name, v.F)
		}
	case Enum:
		if !slices.Contains(f.Values, v.S) {
			return fmt.Errorf("%s is %q, not one of its declared values (%v)", f.Name, v.S, f.Values)
		}
	}
	return nil
}
