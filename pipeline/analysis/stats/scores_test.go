package stats

import (
	"math"
	"testing"

	"github.com/forklab/forklab/pipeline/analysis/analysistest"
)

// The graded-outcome statistics give SciPy's, mpmath's and statsmodels'
// values: t quantiles to 1e-12 up to df 1000 (gonum), the Wilcoxon p to
// 1e-12 relative, the paired t interval to 1e-9 (SciPy's own t quantile
// is good to about 1e-9), Holm exactly.
func TestScoresAgainstReferenceValues(t *testing.T) {
	g := analysistest.LoadScores(t)
	for _, r := range g.T975 {
		tol := 1e-12
		if r[0] > 1000 {
			tol = 1e-10 // gonum's quantile loses digits at very large df
		}
		if got := T975(r[0]); relErr(got, r[1]) > tol {
			t.Errorf("T975(%v) = %.17g, want %.17g", r[0], got, r[1])
		}
	}
	if !math.IsNaN(T975(0)) {
		t.Errorf("T975(0) is a number")
	}
	for _, w := range g.Wilcoxon {
		p, n := Wilcoxon(w.D)
		if n != w.N {
			t.Errorf("%s: n = %d, want %d", w.Name, n, w.N)
		}
		switch {
		case w.P == nil && !math.IsNaN(p):
			t.Errorf("%s: p = %v, want NaN (no nonzero difference)", w.Name, p)
		case w.P != nil && relErr(p, *w.P) > 1e-12:
			t.Errorf("%s: p = %.17g, want %.17g", w.Name, p, *w.P)
		}
	}
	for _, r := range g.PairedT {
		mean, iv := PairedT(r.D)
		if math.Abs(mean-r.Mean) > 1e-15 {
			t.Errorf("%s: mean %.17g, want %.17g", r.Name, mean, r.Mean)
		}
		if r.Lo == nil {
			if !math.IsNaN(iv.Lo) || !math.IsNaN(iv.Hi) {
				t.Errorf("%s: interval %v, want none", r.Name, iv)
			}
			continue
		}
		if math.Abs(iv.Lo-*r.Lo) > 1e-9 || math.Abs(iv.Hi-*r.Hi) > 1e-9 {
			t.Errorf("%s: interval [%.17g, %.17g], want [%.17g, %.17g]", r.Name, iv.Lo, iv.Hi, *r.Lo, *r.Hi)
		}
	}
	for _, h := range g.Holm {
		got := Holm(h.P)
		for i := range got {
			if math.Abs(got[i]-h.Adjusted[i]) > 1e-15 {
				t.Errorf("Holm(%v)[%d] = %v, want %v", h.P, i, got[i], h.Adjusted[i])
			}
		}
	}
}

// Hand-checked values: T+ of {1, 2, 3, -4, 5, 6, 7} is 24 of 28 − 4, so z
// = (24 − 14)/√35 and p = erfc(z/√2); ties share their mean rank; Holm
// keeps the order of the p-values and leaves NaN alone.
func TestScoresHandValues(t *testing.T) {
	p, n := Wilcoxon([]float64{1, 2, 3, -4, 5, 6, 7, 0})
	if want := math.Erfc(10 / math.Sqrt(35) / math.Sqrt2); n != 7 || math.Abs(p-want) > 1e-16 {
		t.Errorf("Wilcoxon = %v (n %d), want %v (n 7)", p, n, want)
	}
	// |d| 1, 1, 2: ranks 1.5, 1.5, 3; T+ = 1.5 + 3; var = 3·4·7/24 − (8 − 2)/48.
	p, _ = Wilcoxon([]float64{1, -1, 2})
	if want := math.Erfc(math.Abs(4.5-3) / math.Sqrt(3.5-6.0/48) / math.Sqrt2); math.Abs(p-want) > 1e-16 {
		t.Errorf("Wilcoxon with a tie = %v, want %v", p, want)
	}
	nan := math.NaN()
	got := Holm([]float64{0.02, nan, 0.01, 0.02})
	if got[0] != 0.04 || !math.IsNaN(got[1]) || got[2] != 0.03 || got[3] != 0.04 {
		t.Errorf("Holm = %v, want [0.04 NaN 0.03 0.04]", got)
	}
	if _, iv := PairedT([]float64{0.5, 0.5, 0.5}); iv.Lo != 0.5 || iv.Hi != 0.5 {
		t.Errorf("equal differences: interval %v, want [0.5, 0.5]", iv)
	}
}
