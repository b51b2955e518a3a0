package stats

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// Reference values computed independently: exact integer sums for
// McNemar's p and the binomial CDF, and the textbook Wilson formula in
// 256-bit floating point (where its cancellation costs nothing).

const prec = 256

func bf(x float64) *big.Float { return new(big.Float).SetPrec(prec).SetFloat64(x) }
func bi(x int64) *big.Float   { return new(big.Float).SetPrec(prec).SetInt64(x) }

// refWilson is (x + z²/2 ∓ z·√(x(n−x)/n + z²/4)) / (n + z²) in 256 bits.
func refWilson(x, n int64, z float64) (lo, hi float64) {
	zz := bf(z)
	z2 := new(big.Float).Mul(zz, zz)
	xf, nf := bi(x), bi(n)
	v := new(big.Float).Quo(new(big.Float).Mul(xf, new(big.Float).Sub(nf, xf)), nf)
	v.Add(v, new(big.Float).Quo(z2, bf(4)))
	root := new(big.Float).Mul(zz, new(big.Float).Sqrt(v))
	c := new(big.Float).Add(xf, new(big.Float).Quo(z2, bf(2)))
	den := new(big.Float).Add(nf, z2)
	lo, _ = new(big.Float).Quo(new(big.Float).Sub(c, root), den).Float64()
	hi, _ = new(big.Float).Quo(new(big.Float).Add(c, root), den).Float64()
	return lo, hi
}

// refMcNemar is min(1, 2·Σ_{i ≤ min(b,c)} C(n, i) / 2^n) from exact
// integers. Past n = 20000 it starts 40·√n + 200 terms below min(b, c),
// leaving out less than 1e-300 of the sum.
func refMcNemar(b, c int64) float64 {
	n, k := b+c, min(b, c)
	i0 := int64(0)
	if n > 20000 {
		i0 = max(0, k-int64(40*math.Sqrt(float64(n)))-200)
	}
	s, term := new(big.Int), new(big.Int).Binomial(n, i0)
	for i := i0; i <= k; i++ {
		s.Add(s, term)
		term.Mul(term, big.NewInt(n-i))
		term.Quo(term, big.NewInt(i+1))
	}
	f := new(big.Float).SetPrec(prec).SetInt(s)
	f.SetMantExp(f, int(1-n))
	v, _ := f.Float64()
	return math.Min(1, v)
}

// binomCDF is P(X ≤ x) for X ~ Bin(m, p), in 256 bits.
func binomCDF(x, m int64, p float64) float64 {
	pp, q := bf(p), new(big.Float).Sub(bf(1), bf(p))
	sum := new(big.Float).SetPrec(prec)
	coef := big.NewInt(1)
	for i := int64(0); i <= x; i++ {
		t := new(big.Float).SetPrec(prec).SetInt(coef)
		for j := int64(0); j < i; j++ {
			t.Mul(t, pp)
		}
		t.Mul(t, pow(q, m-i))
		sum.Add(sum, t)
		coef.Mul(coef, big.NewInt(m-i))
		coef.Quo(coef, big.NewInt(i+1))
	}
	v, _ := sum.Float64()
	return v
}

func pow(x *big.Float, e int64) *big.Float {
	r, b := bf(1), new(big.Float).Copy(x)
	for ; e > 0; e >>= 1 {
		if e&1 == 1 {
			r.Mul(r, b)
		}
		b.Mul(b, b)
	}
	return r
}

func relErr(got, want float64) float64 {
	if got == want {
		return 0
	}
	return math.Abs(got-want) / math.Abs(want)
}

// counts are n from 1 to 2^53 with x at and near both ends, a third, a
// half, and log-uniform random ones.
func counts() [][2]int64 {
	var out [][2]int64
	for _, n := range []int64{1, 2, 3, 4, 5, 7, 10, 17, 30, 100, 299, 1000, 12345, 1e6, 1e9, 1e12, 1e15, 1 << 53} {
		for _, x := range []int64{0, 1, 2, 3, n / 3, n / 2, n - 3, n - 2, n - 1, n} {
			if x >= 0 && x <= n {
				out = append(out, [2]int64{x, n})
			}
		}
	}
	r := rand.New(rand.NewPCG(12, 0))
	for i := 0; i < 300; i++ {
		n := int64(math.Exp(r.Float64() * math.Log(1e13)))
		out = append(out, [2]int64{r.Int64N(n + 1), n})
	}
	return out
}

// Wilson: exact at 0 and n, ordered around x/n, within [0, 1], and equal
// to the textbook formula evaluated without rounding error (issue 12 C:
// wilson_lo(0, 17) was 1.39e-17).
func TestWilsonProperties(t *testing.T) {
	if iv := Wilson(0, 17, Z95); iv.Lo != 0 {
		t.Errorf("Wilson(0, 17).Lo = %g, want exactly 0", iv.Lo)
	}
	if iv := Wilson(17, 17, Z95); iv.Hi != 1 {
		t.Errorf("Wilson(17, 17).Hi = %.17g, want exactly 1", iv.Hi)
	}
	if iv := Wilson(0, 0, Z95); iv != (Interval{0, 1}) {
		t.Errorf("Wilson(0, 0) = %v, want [0, 1]", iv)
	}
	for _, xn := range counts() {
		x, n := xn[0], xn[1]
		iv := Wilson(x, n, Z95)
		p := float64(x) / float64(n)
		if !(0 <= iv.Lo && iv.Lo <= p && p <= iv.Hi && iv.Hi <= 1) {
			t.Errorf("Wilson(%d, %d) = %v, not 0 ≤ lo ≤ %g ≤ hi ≤ 1", x, n, iv, p)
		}
		if (x == 0) != (iv.Lo == 0) || (x == n && iv.Hi != 1) {
			t.Errorf("Wilson(%d, %d) = %v: lo is 0 exactly when x = 0, hi 1 when x = n", x, n, iv)
		}
		lo, hi := refWilson(x, n, Z95)
		if relErr(iv.Lo, lo) > 1e-13 || relErr(iv.Hi, hi) > 1e-13 {
			t.Errorf("Wilson(%d, %d) = [%.17g, %.17g], reference [%.17g, %.17g]", x, n, iv.Lo, iv.Hi, lo, hi)
		}
	}
}

// McNemar: 1 exactly when |b − c| ≤ 1, 2^(1−n) when a count is 0,
// symmetric, within (0, 1], and equal to the exact binomial sum.
func TestMcNemarProperties(t *testing.T) {
	for b := int64(0); b <= 60; b++ {
		for c := int64(0); c <= 60; c++ {
			p := McNemarExact(b, c)
			if p != McNemarExact(c, b) {
				t.Errorf("McNemar(%d, %d) = %v, but (%d, %d) gives %v", b, c, p, c, b, McNemarExact(c, b))
			}
			if d := b - c; (d*d <= 1) != (p == 1) {
				t.Errorf("McNemar(%d, %d) = %.17g: 1 exactly when |b − c| ≤ 1", b, c, p)
			}
			if min(b, c) == 0 && b+c > 1 && p != math.Ldexp(1, int(1-b-c)) {
				t.Errorf("McNemar(%d, %d) = %v, want 2^%d", b, c, p, 1-b-c)
			}
			if want := refMcNemar(b, c); relErr(p, want) > 1e-13 || p <= 0 || p > 1 {
				t.Errorf("McNemar(%d, %d) = %.17g, exact %.17g", b, c, p, want)
			}
		}
	}
	for _, bc := range [][2]int64{{75, 83}, {400, 500}, {1000, 1100}, {3, 2000}, {0, 1074}, {0, 1076}, {10000, 10300}, {50000, 50500}, {100000, 100100}} {
		if got, want := McNemarExact(bc[0], bc[1]), refMcNemar(bc[0], bc[1]); relErr(got, want) > 1e-13 {
			t.Errorf("McNemar(%d, %d) = %.17g, exact %.17g", bc[0], bc[1], got, want)
		}
	}
	// Huge counts: still a probability, and still exact at the boundary.
	for _, bc := range [][2]int64{{5e8, 5e8 + 1}, {4e12, 4e12}, {0, 1e12}, {5e8, 5e8 + 100000}} {
		p := McNemarExact(bc[0], bc[1])
		if p < 0 || p > 1 || math.IsNaN(p) || (bc[1]-bc[0] <= 1 && p != 1) || (bc[0] == 0 && p != 0) {
			t.Errorf("McNemar(%d, %d) = %v", bc[0], bc[1], p)
		}
	}
}

// Newcombe: ordered around the estimate (b − c)/n, within [−1, 1], exact
// at ±1, and equal to the method evaluated on reference Wilson bounds.
func TestNewcombeProperties(t *testing.T) {
	if iv := NewcombePaired(0, 0, 0, 0, Z95); iv != (Interval{-1, 1}) {
		t.Errorf("n = 0: %v, want [-1, 1]", iv)
	}
	var tables [][4]int64
	for _, n := range []int64{1, 2, 3, 10, 17, 300, 1e6, 1e12} {
		tables = append(tables, [4]int64{0, n, 0, 0}, [4]int64{0, 0, n, 0}, [4]int64{n, 0, 0, 0}, [4]int64{0, 0, 0, n},
			[4]int64{n, n, 0, 0}, [4]int64{0, n, n, 0}, [4]int64{n, 1, 0, n}, [4]int64{n / 2, n / 3, n / 5, n / 7})
	}
	r := rand.New(rand.NewPCG(13, 0))
	for i := 0; i < 300; i++ {
		var tb [4]int64
		scale := math.Exp(r.Float64() * math.Log(1e9))
		for j := range tb {
			if r.IntN(4) > 0 {
				tb[j] = int64(r.Float64() * scale)
			}
		}
		tables = append(tables, tb)
	}
	for _, tb := range tables {
		a, b, c, d := tb[0], tb[1], tb[2], tb[3]
		n := a + b + c + d
		if n == 0 {
			continue
		}
		iv := NewcombePaired(a, b, c, d, Z95)
		e := float64(b-c) / float64(n)
		if !(-1 <= iv.Lo && iv.Lo <= e && e <= iv.Hi && iv.Hi <= 1) {
			t.Errorf("Newcombe%v = %v, not −1 ≤ lo ≤ %g ≤ hi ≤ 1", tb, iv, e)
		}
		if (b == n && iv.Hi != 1) || (c == n && iv.Lo != -1) {
			t.Errorf("Newcombe%v = %v: every pair rescued has hi 1, every pair harmed lo −1", tb, iv)
		}
		// The method on reference Wilson bounds, in float64.
		l1, u1 := refWilson(a+b, n, Z95)
		l2, u2 := refWilson(a+c, n, Z95)
		p1, p2 := float64(a+b)/float64(n), float64(a+c)/float64(n)
		phi := newcombePhi(a, b, c, d)
		lo := e - math.Sqrt(math.Max(0, (p1-l1)*(p1-l1)-2*phi*(p1-l1)*(u2-p2)+(u2-p2)*(u2-p2)))
		hi := e + math.Sqrt(math.Max(0, (u1-p1)*(u1-p1)-2*phi*(u1-p1)*(p2-l2)+(p2-l2)*(p2-l2)))
		lo, hi = max(-1, min(lo, e)), min(1, max(hi, e))
		if math.Abs(iv.Lo-lo) > 1e-13 || math.Abs(iv.Hi-hi) > 1e-13 {
			t.Errorf("Newcombe%v = [%.17g, %.17g], reference [%.17g, %.17g]", tb, iv.Lo, iv.Hi, lo, hi)
		}
	}
}

// Clopper–Pearson: 1 at x = m and m = 0, never below x/m, and the bound
// U where P(X ≤ x; m, U) = 0.05, checked with the exact binomial CDF; for
// x = 0 and huge m it keeps its digits.
func TestClopperPearsonProperties(t *testing.T) {
	for _, m := range []int64{0, 1, 2, 5, 29, 150, 1000, 2000} {
		for _, x := range []int64{0, 1, 2, 5, m / 2, m - 1, m} {
			if x < 0 || x > m {
				continue
			}
			u := ClopperPearsonUpper(x, m, 0.95)
			switch {
			case m == 0 || x == m:
				if u != 1 {
					t.Errorf("ClopperPearsonUpper(%d, %d) = %v, want 1", x, m, u)
				}
				continue
			case u < float64(x)/float64(m) || u >= 1:
				t.Errorf("ClopperPearsonUpper(%d, %d) = %v, not in [x/m, 1)", x, m, u)
			}
			if f := binomCDF(x, m, u); relErr(f, 0.05) > 1e-9 {
				t.Errorf("ClopperPearsonUpper(%d, %d) = %.17g: P(X ≤ %d) there is %.17g, want 0.05", x, m, u, x, f)
			}
		}
	}
	// −ln(0.05)/m, to within the u/2 the exponential adds.
	for _, m := range []int64{1e9, 1e12, 1e15} {
		u := ClopperPearsonUpper(0, m, 0.95)
		if want := -math.Log(0.05) / float64(m); relErr(u, want) > 1e-6*float64(1e9)/float64(m)+1e-15 {
			t.Errorf("ClopperPearsonUpper(0, %d) = %.17g, want about %.17g", m, u, want)
		}
	}
}
