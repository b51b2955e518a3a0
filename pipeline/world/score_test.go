package world_test

import (
	"math"
	"testing"

	"github.com/forklab/forklab/pipeline/world"
)

// A declared score has a finite, non-empty range and a threshold inside
// it; a branch's score is a finite number inside the range; the threshold
// derives success; differences round to the same double when they are
// equal in exact arithmetic.
func TestScoreSpec(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		spec world.ScoreSpec
		want string
	}{
		{world.ScoreSpec{Min: 0, Max: 1}, ""},
		{world.ScoreSpec{Min: 1, Max: 10, Threshold: world.Bound(7)}, ""},
		{world.ScoreSpec{Min: 0, Max: 1, Threshold: world.Bound(1)}, ""},
		{world.ScoreSpec{Min: 1, Max: 1}, "world w: score: min (1) must be below max (1)"},
		{world.ScoreSpec{Min: 2, Max: 1}, "world w: score: min (2) must be below max (1)"},
		{world.ScoreSpec{Min: nan, Max: 1}, "world w: score: min and max must be finite numbers, got [NaN, 1]"},
		{world.ScoreSpec{Min: 0, Max: inf}, "world w: score: min and max must be finite numbers, got [0, +Inf]"},
		{world.ScoreSpec{Min: 0, Max: 1, Threshold: world.Bound(1.5)}, "world w: score: threshold 1.5 must lie in [min, max] = [0, 1]"},
	} {
		d := base()
		d.Score = &tc.spec
		err := d.Validate()
		if (err == nil) != (tc.want == "") || (err != nil && err.Error() != tc.want) {
			t.Errorf("%+v: %v, want %q", tc.spec, err, tc.want)
		}
	}
	s := world.ScoreSpec{Min: 1, Max: 10, Threshold: world.Bound(7)}
	for x, want := range map[float64]string{
		1: "", 10: "", 7.5: "",
		0.5:  "score 0.5 is outside the declared range [1, 10]",
		11:   "score 11 is outside the declared range [1, 10]",
		nan:  "score NaN is not a finite number: the world declares scores in [1, 10]",
		-inf: "score -Inf is not a finite number: the world declares scores in [1, 10]",
	} {
		err := s.Check(x)
		if (err == nil) != (want == "") || (err != nil && err.Error() != want) {
			t.Errorf("Check(%v) = %v, want %q", x, err, want)
		}
	}
	if ok, derived := s.Success(7); !ok || !derived {
		t.Errorf("score 7 at threshold 7: success %v, derived %v", ok, derived)
	}
	if ok, _ := s.Success(6.999); ok {
		t.Errorf("score 6.999 at threshold 7 succeeded")
	}
	if _, derived := (&world.ScoreSpec{Min: 0, Max: 1}).Success(1); derived {
		t.Errorf("no threshold, yet success derived")
	}
	unit := world.ScoreSpec{Min: 0, Max: 1}
	one, two, three := 1.0, 2.0, 3.0
	if x, y := one-two/three, one/three; x == y {
		t.Fatalf("1 - 2/3 and 1/3 are the same double: the test shows nothing")
	} else if a, b := unit.RoundDiff(x), unit.RoundDiff(y); a != b || a != 0.333333333333 {
		t.Errorf("1 - 2/3 rounds to %v, 1/3 to %v: want one tie, 0.333333333333", a, b)
	}
	if a := (&world.ScoreSpec{Min: 1, Max: 10}).RoundDiff(two / three); a != 0.66666666667 {
		t.Errorf("2/3 on [1, 10] rounds to %v, want 11 decimals", a)
	}
	if a := unit.RoundDiff(three/10 - one/10 - two/10); a != 0 || three/10-one/10-two/10 == 0 {
		t.Errorf("rounding noise rounds to %v, want 0", a)
	}
	if z := unit.RoundDiff(-1e-14); math.Signbit(z) || z != 0 {
		t.Errorf("a difference below the quantum rounds to %v, want 0", z)
	}
}
