package stats

import (
	"cmp"
	"math"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"
)

// Graded outcomes. Where a world declares a score (world.ScoreSpec), each
// pair has a score difference d = treated − control (each side's mean
// score over its replicas). The summary and the slices report the mean
// paired difference with a 95% paired-t interval, and the Wilcoxon
// signed-rank test of d as SciPy computes it with
// scipy.stats.wilcoxon(d, zero_method="wilcox", correction=False,
// method="approx"): zero differences dropped, tied |d| given their mean
// rank, the normal approximation with the tie-corrected variance and no
// continuity correction. queries/stats.sql defines the same quantities as
// macros; testdata/stats/gen_scores.py writes reference values with SciPy.

// T975 returns Student's t quantile t(0.975; df), the multiplier of a
// two-sided 95% interval with df degrees of freedom (gonum's StudentsT; it
// agrees with a 40-digit mpmath root of the t distribution function to
// 1e-13 up to df 1000). NaN for df < 1.
func T975(df float64) float64 {
	if !(df >= 1) {
		return math.NaN()
	}
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(0.975)
}

// PairedT returns the mean of the paired differences d and its 95%
// interval by the one-sample t method on the differences (the paired t
// interval: mean ± t(0.975; n−1)·s/√n, s the sample standard deviation,
// Student 1908; scipy.stats.ttest_1samp(d).confidence_interval()). The
// mean is NaN without differences; the interval is NaN with fewer than
// two, and the mean itself when every difference is the same.
func PairedT(d []float64) (mean float64, iv Interval) {
	n := float64(len(d))
	if len(d) == 0 {
		return math.NaN(), Interval{math.NaN(), math.NaN()}
	}
	sum := 0.0
	for _, x := range d {
		sum += x
	}
	mean = sum / n
	if len(d) < 2 {
		return mean, Interval{math.NaN(), math.NaN()}
	}
	ss := 0.0
	for _, x := range d {
		ss += (x - mean) * (x - mean)
	}
	h := T975(n-1) * math.Sqrt(ss/(n-1)/n)
	return mean, Interval{mean - h, mean + h}
}

// Wilcoxon returns the two-sided p-value of the Wilcoxon signed-rank test
// of the paired differences d against a distribution symmetric about 0,
// and n, the number of nonzero differences it ranks (F. Wilcoxon,
// "Individual comparisons by ranking methods", Biometrics Bulletin 1,
// 1945). Zeros are dropped (Wilcoxon's own treatment, SciPy's
// zero_method="wilcox"); the |d| are ranked with ties given their mean
// rank; with T+ the rank sum of the positive differences,
//
//	z = (T+ − n(n+1)/4) / √(n(n+1)(2n+1)/24 − Σ(t³ − t)/48)
//
// over the tie groups' sizes t, and p = 2·Φ(−|z|) = erfc(|z|/√2): SciPy's
// method="approx" with correction=False. With few nonzero differences
// (fewer than about 10) the normal approximation is rough. p is NaN when
// no difference is nonzero; 1 when T+ is exactly its mean.
func Wilcoxon(d []float64) (p float64, n int64) {
	abs := make([]float64, 0, len(d))
	pos := make([]bool, 0, len(d))
	for _, x := range d {
		if x != 0 {
			abs = append(abs, math.Abs(x))
			pos = append(pos, x > 0)
		}
	}
	n = int64(len(abs))
	if n == 0 {
		return math.NaN(), 0
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(abs[a], abs[b]) })
	var tPlus, ties float64
	for i := 0; i < len(idx); {
		j := i
		for j < len(idx) && abs[idx[j]] == abs[idx[i]] {
			j++
		}
		rank := float64(i+j+1) / 2 // mean of ranks i+1 .. j
		for _, k := range idx[i:j] {
			if pos[k] {
				tPlus += rank
			}
		}
		t := float64(j - i)
		ties += t*t*t - t
		i = j
	}
	nf := float64(n)
	mean := nf * (nf + 1) / 4
	sd := math.Sqrt(nf*(nf+1)*(2*nf+1)/24 - ties/48)
	return math.Erfc(math.Abs(tPlus-mean) / sd / math.Sqrt2), n
}

// Holm returns Holm's step-down adjustment of the p-values p (S. Holm, "A
// simple sequentially rejective multiple test procedure", Scandinavian
// Journal of Statistics 6, 1979): with p sorted ascending, p(i) becomes
// max over j ≤ i of min(1, (m − j + 1)·p(j)), m the number of p-values,
// and each adjusted value goes back to its p's place. It controls the
// family-wise error rate under any dependence between the tests (slices
// of one arm share pairs). NaN p-values take no part (m counts the
// others) and stay NaN; equal p-values get the same adjusted value.
func Holm(p []float64) []float64 {
	out := make([]float64, len(p))
	var idx []int
	for i, x := range p {
		out[i] = math.NaN()
		if !math.IsNaN(x) {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(p[a], p[b]) })
	m := float64(len(idx))
	run := 0.0
	for j, i := range idx {
		run = max(run, min(1, (m-float64(j))*p[i]))
		out[i] = run
	}
	return out
}
