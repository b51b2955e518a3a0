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
// Φ⁻¹(0.975) ≈ 1.959963984540054.
var Z95 = distuv.UnitNormal.Quantile(0.975)

// Interval is a confidence interval [Lo, Hi].
type Interval struct{ Lo, Hi float64 }

// Wilson returns the Wilson score interval for x successes in n trials at
// normal quantile z (E. B. Wilson, "Probable inference, the law of
// succession, and statistical inference", JASA 22, 1927). For n = 0 it is
// [0, 1].
func Wilson(x, n int64, z float64) Interval {
	if n == 0 {
		return Interval{0, 1}
	}
	p := float64(x) / float64(n)
	nf := float64(n)
	z2 := z * z
	denom := 1 + z2/nf
	center := (p + z2/(2*nf)) / denom
	half := z / denom * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf))
	return Interval{max(0, center-half), min(1, center+half)}
}

// McNemarExact returns the exact two-sided p-value of McNemar's test on the
// discordant pairs b and c: min(1, 2·P(X ≤ min(b, c))) for X ~ Bin(b+c, ½)
// (McNemar, Psychometrika 12, 1947; the exact conditional form as in
// Fagerland, Lydersen and Laake, BMC Med Res Methodol 13:91, 2013). With no
// discordant pairs it is 1. For b = 75, c = 83 it is 0.5777428358653729.
func McNemarExact(b, c int64) float64 {
	n := b + c
	if n == 0 {
		return 1
	}
	k := min(b, c)
	p := 2 * distuv.Binomial{N: float64(n), P: 0.5}.CDF(float64(k))
	return min(1, p)
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
func NewcombePaired(a, b, c, d int64, z float64) Interval {
	n := a + b + c + d
	if n == 0 {
		return Interval{-1, 1}
	}
	nf := float64(n)
	p1, p2 := float64(a+b)/nf, float64(a+c)/nf
	w1, w2 := Wilson(a+b, n, z), Wilson(a+c, n, z)
	var phi float64
	if m := float64(a+b) * float64(c+d) * float64(a+c) * float64(b+d); m > 0 {
		ad := float64(a)*float64(d) - float64(b)*float64(c)
		switch {
		case ad > nf/2:
			phi = (ad - nf/2) / math.Sqrt(m)
		case ad >= 0:
			phi = 0
		default:
			phi = ad / math.Sqrt(m)
		}
	}
	delta := p1 - p2
	dl1, du1 := p1-w1.Lo, w1.Hi-p1
	dl2, du2 := p2-w2.Lo, w2.Hi-p2
	lo := delta - math.Sqrt(math.Max(0, dl1*dl1-2*phi*dl1*du2+du2*du2))
	hi := delta + math.Sqrt(math.Max(0, du1*du1-2*phi*du1*dl2+dl2*dl2))
	return Interval{max(-1, lo), min(1, hi)}
}

// ClopperPearsonUpper returns the exact one-sided upper confidence bound, at
// confidence level conf (0.95 for 95%), for a proportion with x events in m
// trials: the conf quantile of Beta(x+1, m−x), 1 for x = m (Clopper and
// Pearson, Biometrika 26, 1934). With x = 0 it is 1 − (1−conf)^(1/m). For
// m = 0 it is 1.
func ClopperPearsonUpper(x, m int64, conf float64) float64 {
	if m == 0 || x >= m {
		return 1
	}
	if x == 0 {
		return 1 - math.Pow(1-conf, 1/float64(m))
	}
	return distuv.Beta{Alpha: float64(x + 1), Beta: float64(m - x)}.Quantile(conf)
}
