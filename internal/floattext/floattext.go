// Package floattext reads floating-point literals (a flag's value, a
// spec file's number, a JSON number an agent sent) the way strconv does,
// but refuses every literal a float64 cannot hold instead of rounding it
// silently: NaN, ±Inf, a finite literal too large for a float64 (strconv
// gives ±Inf), and a non-zero literal too small for one (strconv gives 0
// without an error: 1e-400 would read as 0). Subnormal numbers (down to
// about 4.9e-324) are held and accepted.
//
// The package is shared by the lab (pipeline/) and the command, so it
// lives in internal/.
package floattext

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrNotFloat64 reports a literal a float64 cannot hold; errors from
// Parse and Check wrap it.
var ErrNotFloat64 = errors.New("cannot be held by a float64")

// Parse reads s (surrounding spaces ignored) as strconv.ParseFloat does
// with 64 bits, refusing NaN, ±Inf, overflow and non-zero underflow. The
// error says which, e.g. `1e-400 is too small for a float64: it would read
// as 0`; a literal that is not a number at all gets strconv's error.
func Parse(s string) (float64, error) {
	s = strings.TrimSpace(s)
	v, err := strconv.ParseFloat(s, 64)
	var ne *strconv.NumError
	if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
		return 0, fmt.Errorf("%s is too large for a float64 (%w)", s, ErrNotFloat64)
	}
	if err != nil {
		return 0, err
	}
	return v, Check(s, v)
}

// Check says whether v, which literal was read as (by strconv, encoding/json
// or a YAML decoder), holds it: not NaN or ±Inf, and not 0 from a literal
// with a non-zero digit.
func Check(literal string, v float64) error {
	literal = strings.TrimSpace(literal)
	switch {
	case math.IsNaN(v):
		return fmt.Errorf("%s is not a number (%w)", literal, ErrNotFloat64)
	case math.IsInf(v, 0):
		if nonZero(literal) && !isInfText(literal) {
			return fmt.Errorf("%s is too large for a float64 (%w)", literal, ErrNotFloat64)
		}
		return fmt.Errorf("%s is not finite (%w)", literal, ErrNotFloat64)
	case v == 0 && nonZero(literal):
		return fmt.Errorf("%s is too small for a float64: it would read as 0 (%w)", literal, ErrNotFloat64)
	}
	return nil
}

func isInfText(s string) bool {
	s = strings.ToLower(strings.TrimLeft(s, "+-."))
	return strings.HasPrefix(s, "inf")
}

// nonZero says whether the mantissa of a decimal or hexadecimal literal
// has a non-zero digit.
func nonZero(s string) bool {
	s = strings.ToLower(strings.TrimLeft(strings.TrimSpace(s), "+-"))
	digits, exp := "123456789", "e"
	if strings.HasPrefix(s, "0x") {
		s, digits, exp = s[2:], "123456789abcdef", "p"
	}
	if i := strings.Index(s, exp); i >= 0 {
		s = s[:i]
	}
	return strings.ContainsAny(s, digits)
}
