package world

import (
	"fmt"
	"math"
	"strconv"
)

// ScoreSpec declares a graded outcome: a number every finished branch
// reports beside success (a share of facts right, a rubric score, a
// judge's 1 to 10). Its range is closed: Min <= score <= Max. When
// Threshold is set, success is derived from the score (success is score
// >= Threshold), and an agent may leave success out of its branch results
// (docs/agent-protocol.md, "Scores"). In a declaration's JSON:
//
//	"score": {"min": 0, "max": 1, "threshold": 1, "unit": "share of facts",
//	          "description": "the share of the task's facts the answer got right"}
type ScoreSpec struct {
	// Min and Max bound the score, both finite, Min < Max.
	Min float64 `json:"min"`
	Max float64 `json:"max"`
	// Threshold, if set, lies in [Min, Max]: a branch succeeded exactly
	// when its score is at least Threshold.
	Threshold *float64 `json:"threshold,omitempty"`
	// Unit names what the score counts ("share of facts", "points").
	Unit string `json:"unit,omitempty"`
	// Description says what the score means, for people.
	Description string `json:"description"`
}

// Scorer is what a built-in world implements to report a graded outcome
// (its declaration then has a Score): the score of a finished run, within
// the declared range. Like World's methods it is a pure function of s.
type Scorer[S any] interface {
	Score(s *S) float64
}

// validate checks the score's range and threshold.
func (s *ScoreSpec) validate(world string) error {
	switch {
	case math.IsNaN(s.Min) || math.IsInf(s.Min, 0) || math.IsNaN(s.Max) || math.IsInf(s.Max, 0):
		return fmt.Errorf("world %s: score: min and max must be finite numbers, got [%v, %v]", world, s.Min, s.Max)
	case !(s.Min < s.Max):
		return fmt.Errorf("world %s: score: min (%v) must be below max (%v)", world, s.Min, s.Max)
	case s.Threshold != nil && !(*s.Threshold >= s.Min && *s.Threshold <= s.Max):
		return fmt.Errorf("world %s: score: threshold %v must lie in [min, max] = [%v, %v]", world, *s.Threshold, s.Min, s.Max)
	}
	return nil
}

// Check reports a score a branch may not have: NaN, an infinity, or a
// number outside [Min, Max]. The error says which and names the range.
func (s *ScoreSpec) Check(x float64) error {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return fmt.Errorf("score %v is not a finite number: the world declares scores in [%s, %s]", x, fmtScore(s.Min), fmtScore(s.Max))
	}
	if x < s.Min || x > s.Max {
		return fmt.Errorf("score %s is outside the declared range [%s, %s]", fmtScore(x), fmtScore(s.Min), fmtScore(s.Max))
	}
	return nil
}

// Success is the success a score means: score >= Threshold; ok is false
// when the declaration sets no threshold.
func (s *ScoreSpec) Success(x float64) (success, ok bool) {
	if s.Threshold == nil {
		return false, false
	}
	return x >= *s.Threshold, true
}

// DiffDecimals is how many decimals score differences keep when they are
// stored (pairs.score_diff): 12 significant digits of the declared
// range's width (12 decimals for [0, 1], 11 for [1, 10]). Two differences
// that are equal in exact arithmetic (1 − 2/3 and 1/3 − 0, which differ in
// their last bit as doubles) then compare equal, so that the Wilcoxon
// signed-rank test sees them as the tie they are, and a difference of
// rounding noise (0.3 − 0.1 − 0.2) is 0.
func (s *ScoreSpec) DiffDecimals() int {
	return max(0, 12-int(math.Ceil(math.Log10(s.Max-s.Min))))
}

// RoundDiff rounds a score difference to DiffDecimals decimals: the double
// nearest that decimal, never −0.
func (s *ScoreSpec) RoundDiff(d float64) float64 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(d, 'f', s.DiffDecimals(), 64), 64)
	if r == 0 {
		return 0
	}
	return r
}

func fmtScore(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
