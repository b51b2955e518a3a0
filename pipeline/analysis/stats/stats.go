// Package stats holds the statistics forklab reports for paired outcomes,
// one formula per function with its source. Distributions come from gonum
// (gonum.org/v1/gonum/stat/distuv); queries/stats.sql defines the same
// quantities as DuckDB macros, and the tests hold both to the same values.
//
// A pair compares a treatment arm with the control on the same checkpoint.
// In the paired 2×2 table of n pairs,
//
//	sure_thing  both succeed        rescued  treatment only (persuadable)
//	harmed      control only        lost     neither
//	            (sleeping dog)
//
// the discordant pairs are rescued and harmed, and the net rate
// (rescued − harmed)/n is the difference of the paired success proportions.
package stats

import (
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// Z95 is the standard normal quantile for a two-sided 95% interval,
// Φ⁻¹(0.975) = 1.9599639845400542355…, rounded to the nearest float64
// (gonum's UnitNormal.Quantile(0.975) and Python's NormalDist give
// 1.9599639845400536, two units of the last place lower). queries/stats.sql
// writes the same literal, so the Go and SQL intervals agree to the bit.
const Z95 = 1.959963984540054

// Interval is a confidence interval [Lo, Hi].
type Interval struct{ Lo, Hi float64 }

// Wilson returns the Wilson score interval for x successes in n trials at
// normal quantile z (E. B. Wilson, "Probable inference, the law of
// succession, and statistical inference", JASA 22, 1927). For n = 0 it is
// [0, 1].
//
// It is exact at the boundaries and ordered: Lo is 0 exactly for x = 0 and
// Hi is 1 exactly for x = n, and Lo ≤ x/n ≤ Hi (x/n as one division, as
// the SQL computes a rate). The lower bound is computed in the form
// x² / (n·(x + z²/2 + z·√(x(n−x)/n + z²/4))), equal to the textbook
// (x + z²/2 − z·√…)/(n + z²) but without its cancellation, which left
// 1.39e-17 for x = 0, n = 17 (issue 12 C).
func Wilson(x, n int64, z float64) Interval {
	if n == 0 {
		return Interval{0, 1}
	}
	xf, nf := float64(x), float64(n)
	p := xf / nf
	z2 := z * z
	root := z * math.Sqrt(xf*(nf-xf)/nf+z2/4)
	lo, hi := 0.0, 1.0
	if x > 0 {
		lo = min(p, xf*xf/(nf*(xf+z2/2+root)))
	}
	if x < n {
		hi = max(p, min(1, (xf+z2/2+root)/(nf+z2)))
	}
	return Interval{lo, hi}
}

// McNemarExact returns the exact two-sided p-value of McNemar's test on the
// discordant pairs b and c: min(1, 2·P(X ≤ min(b, c))) for X ~ Bin(b+c, ½)
// (McNemar, Psychometrika 12, 1947; the exact conditional form as in
// Fagerland, Lydersen and Laake, BMC Med Res Methodol 13:91, 2013). For
// b = 75, c = 83 it is 0.5777428358653729.
//
// Exact at its boundaries: 1 when |b − c| ≤ 1 (no discordant pairs, or the
// two counts as close as they can be: P(X ≤ min) ≥ ½ then), 2^(1−n) when
// one count is 0 (0 once that underflows, past n = 1075). Elsewhere it sums
// the binomial terms from 7·√n + 30 below min(b, c) up (the ones before add
// less than 1e-40 of the sum), each term by Loader's saddle-point form
// (BinomHalf), so it keeps about 13 digits at any n, where a sum of
// lgamma differences keeps only 9 at 10^6 discordant pairs and 6 at 10^9.
// queries/stats.sql's mcnemar_p is the same sum.
func McNemarExact(b, c int64) float64 {
	n := b + c
	k := min(b, c)
	if n-2*k <= 1 {
		return 1
	}
	if k == 0 {
		return math.Ldexp(1, int(max(1-n, -2000)))
	}
	lo := max(0, k-int64(math.Ceil(7*math.Sqrt(float64(n))))-30)
	sum := 0.0
	for i := lo; i <= k; i++ {
		sum += BinomHalf(i, n)
	}
	return min(1, 2*sum)
}

// BinomHalf returns P(X = i) for X ~ Bin(n, ½), 0 ≤ i ≤ n. Inside (0 < i <
// n) it is Loader's saddle-point expansion, exp(stirlerr(n) − stirlerr(i) −
// stirlerr(n−i) − bd0(i, n/2) − bd0(n−i, n/2)) / √(2π·i·(n−i)/n) (C. Loader,
// "Fast and accurate computation of binomial probabilities", 2000; R's
// dbinom_raw), which has no cancellation however large n is; at the ends it
// is 2^−n.
func BinomHalf(i, n int64) float64 {
	if i == 0 || i == n {
		return math.Ldexp(1, int(max(-n, -2000)))
	}
	x, nf := float64(i), float64(n)
	lc := stirlerr(nf) - stirlerr(x) - stirlerr(nf-x) - bd0(x, nf/2) - bd0(nf-x, nf/2)
	lf := math.Log(2*math.Pi) + math.Log(x) + math.Log((nf-x)/nf)
	return math.Exp(lc - 0.5*lf)
}

// stirlerr(m) = ln Γ(m+1) − ((m+½)·ln m − m + ½·ln 2π), the error of
// Stirling's formula: its asymptotic series above 15 (Loader 2000), the
// difference itself at and below (small numbers, little cancellation).
func stirlerr(m float64) float64 {
	const s0, s1, s2, s3, s4 = 1.0 / 12, 1.0 / 360, 1.0 / 1260, 1.0 / 1680, 1.0 / 1188
	m2 := m * m
	switch {
	case m > 500:
		return (s0 - s1/m2) / m
	case m > 80:
		return (s0 - (s1-s2/m2)/m2) / m
	case m > 35:
		return (s0 - (s1-(s2-s3/m2)/m2)/m2) / m
	case m > 15:
		return (s0 - (s1-(s2-(s3-s4/m2)/m2)/m2)/m2) / m
	}
	lg, _ := math.Lgamma(m + 1)
	return lg - (m+0.5)*math.Log(m) + m - 0.5*math.Log(2*math.Pi)
}

// bd0(x, np) = x·ln(x/np) + np − x, the deviance term of Loader (2000):
// for x near np (|v| < 0.1) by the series (x−np)·v + 2x·Σ_{j=1..9}
// v^(2j+1)/(2j+1), v = (x−np)/(x+np) (the terms left out add less than
// 1e-20 of the first), which avoids the cancellation of the direct form.
func bd0(x, np float64) float64 {
	if math.Abs(x-np) < 0.1*(x+np) {
		v := (x - np) / (x + np)
		series := 0.0
		for j := 1; j < 10; j++ {
			series += math.Pow(v, float64(2*j+1)) / float64(2*j+1)
		}
		return (x-np)*v + 2*x*series
	}
	return x*math.Log(x/np) + np - x
}

// NewcombePaired returns the 95%-style interval, at normal quantile z, for
// the difference of paired proportions p1 − p2 with p1 = (a+b)/n (treatment
// success) and p2 = (a+c)/n (control success), where a = both succeed
// (sure things), b = treatment only (rescued), c = control only (harmed),
// d = neither (lost causes). It is Newcombe's square-and-add method 10
// (R. G. Newcombe, "Improved confidence intervals for the difference between
// binomial proportions based on paired data", Stat Med 17:2635–2650, 1998),
// with Wilson intervals for p1 and p2 and their correlation φ estimated from
// the table, AD − BC replaced by AD − BC − n/2 when that is positive and by
// 0 when AD − BC lies in [0, n/2], as in Newcombe and Altman's chapter of
// "Statistics with Confidence" (2000) and Fagerland, Lydersen and Laake,
// "Statistical Analysis of Contingency Tables" (2017), section 8.5. For the
// book's example (a, b, c, d) = (59, 6, 16, 80) it is [−0.1186, −0.0046].
//
// For n = 0 it is [−1, 1]. It is ordered around the estimate (b − c)/n, as
// the SQL computes the net rate: Lo ≤ (b − c)/n ≤ Hi, within [−1, 1]; with
// every pair rescued Hi is 1 exactly, with every pair harmed Lo is −1.
func NewcombePaired(a, b, c, d int64, z float64) Interval {
	n := a + b + c + d
	if n == 0 {
		return Interval{-1, 1}
	}
	nf := float64(n)
	p1, p2 := float64(a+b)/nf, float64(a+c)/nf
	w1, w2 := Wilson(a+b, n, z), Wilson(a+c, n, z)
	phi := newcombePhi(a, b, c, d)
	delta := float64(b-c) / nf
	dl1, du1 := p1-w1.Lo, w1.Hi-p1
	dl2, du2 := p2-w2.Lo, w2.Hi-p2
	lo := delta - math.Sqrt(math.Max(0, dl1*dl1-2*phi*dl1*du2+du2*du2))
	hi := delta + math.Sqrt(math.Max(0, du1*du1-2*phi*du1*dl2+dl2*dl2))
	return Interval{max(-1, min(lo, delta)), min(1, max(hi, delta))}
}

// newcombePhi is φ, the correlation of the paired proportions, with AD − BC
// shrunk by n/2 towards 0 (0 inside [0, n/2]); 0 when a margin is empty.
func newcombePhi(a, b, c, d int64) float64 {
	m := float64(a+b) * float64(c+d) * float64(a+c) * float64(b+d)
	if m == 0 {
		return 0
	}
	nf := float64(a + b + c + d)
	ad := float64(a)*float64(d) - float64(b)*float64(c)
	switch {
	case ad > nf/2:
		return (ad - nf/2) / math.Sqrt(m)
	case ad >= 0:
		return 0
	}
	return ad / math.Sqrt(m)
}

// ClopperPearsonUpper returns the exact one-sided upper confidence bound, at
// confidence level conf (0.95 for 95%), for a proportion with x events in m
// trials: the conf quantile of Beta(x+1, m−x), 1 for x = m (Clopper and
// Pearson, Biometrika 26, 1934). With x = 0 it is 1 − (1−conf)^(1/m),
// computed as −expm1(ln(1−conf)/m) so that it keeps its digits for large m
// (3e-12 for m = 10^12, where 1 − pow kept four). For m = 0 it is 1. It is
// never below x/m.
func ClopperPearsonUpper(x, m int64, conf float64) float64 {
	if m == 0 || x >= m {
		return 1
	}
	if x == 0 {
		return -math.Expm1(math.Log1p(-conf) / float64(m))
	}
	q := distuv.Beta{Alpha: float64(x + 1), Beta: float64(m - x)}.Quantile(conf)
	return min(1, max(q, float64(x)/float64(m)))
}
