package gate

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Where names a check's arm, configuration (when the sweep has several)
// and fork step: "on · fork step 3", "policy · config 1 · fork step 2".
func (c Check) Where(configs bool) string {
	w := c.Arm
	if configs {
		w += fmt.Sprintf(" · config %d", c.ConfigID)
	}
	return w + fmt.Sprintf(" · fork step %d", c.ForkStep)
}

// Condition words the comparison: "harm rate 2.33%, want <= 5%", "net
// 95% lower end 4.12, want >= 1", "McNemar p 0.0031, want <= 0.05".
func (c Check) Condition() string {
	what := c.What
	if c.Bound && c.Flag != "max-p" {
		end := "lower"
		if c.Op == "<=" {
			end = "upper"
		}
		what += " 95% " + end + " end"
	}
	return fmt.Sprintf("%s %s, want %s %s", what, c.format(c.Value, true), c.Op, c.format(c.Threshold, false))
}

// format writes a value or threshold of c's kind: rates as percentages,
// counts as integers (an interval's end with two decimals), p-values and
// score differences with their digits; "n/a" for NaN.
func (c Check) format(x float64, value bool) string {
	if math.IsNaN(x) {
		if c.Flag == "max-p" && value {
			return fmt.Sprintf("n/a (the net, %+d, is not a gain)", c.Net)
		}
		return "n/a"
	}
	switch c.Flag {
	case "max-harm-rate", "min-net-rate", "max-error-rate":
		return pct(x)
	case "max-harmed", "min-net":
		if value && c.Bound {
			return strconv.FormatFloat(x, 'f', 2, 64)
		}
		return strconv.FormatFloat(x, 'f', 0, 64)
	case "max-p":
		return pval(x)
	}
	return num(x)
}

// Line is the check's line: "PASS  on · fork step 3  harm rate 2.33%,
// want <= 5%  (--max-harm-rate)".
func (c Check) Line(configs bool) string {
	verdict := "PASS"
	if !c.Pass {
		verdict = "FAIL"
	}
	return fmt.Sprintf("%s  %s  %s  (--%s)", verdict, c.Where(configs), c.Condition(), c.Flag)
}

// Write prints one line per check, then a line that sums them up, and
// returns how many failed.
func Write(w io.Writer, checks []Check, configs, bound bool) int {
	failed := 0
	for _, c := range checks {
		fmt.Fprintln(w, c.Line(configs))
		if !c.Pass {
			failed++
		}
	}
	on := "the point estimates"
	if bound {
		on = "the worse ends of the 95% intervals"
	}
	if failed == 0 {
		fmt.Fprintf(w, "gate: all %d conditions hold (on %s)\n", len(checks), on)
	} else {
		fmt.Fprintf(w, "gate: %d of %d conditions fail (on %s)\n", failed, len(checks), on)
	}
	return failed
}

// pct writes a share as a percentage with up to two decimals: 2.33%, 5%.
func pct(x float64) string {
	if math.IsNaN(x) {
		return "n/a"
	}
	s := strconv.FormatFloat(100*x, 'f', 2, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		s = "0"
	}
	return s + "%"
}

// pval writes a p-value with two significant digits.
func pval(p float64) string {
	if math.IsNaN(p) {
		return "n/a"
	}
	return strconv.FormatFloat(p, 'g', 2, 64)
}

// num writes a number with up to four significant digits.
func num(x float64) string {
	if math.IsNaN(x) {
		return "n/a"
	}
	return strconv.FormatFloat(x, 'g', 4, 64)
}
