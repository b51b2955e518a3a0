#!/usr/bin/env python3
"""Writes golden.json: reference values for pipeline/analysis/stats and
queries/stats.sql, computed independently of forklab with Python's standard
library: McNemar's exact p and the Clopper-Pearson bound from exact rational
binomial sums (for large counts, McNemar's p from ln n! to 50 decimal digits), Wilson and Newcombe from their published formulas with
statistics.NormalDist. Run: python3 testdata/stats/gen.py"""
import json, math, os
from decimal import Decimal, getcontext
from fractions import Fraction
from statistics import NormalDist

Z = NormalDist().inv_cdf(0.975)

def binom_cdf_half(k, n):
    return Fraction(sum(math.comb(n, i) for i in range(k + 1)), 2 ** n)

def mcnemar(b, c):
    n = b + c
    if n == 0:
        return 1.0
    return float(min(Fraction(1), 2 * binom_cdf_half(min(b, c), n)))

def wilson(x, n, z=Z):
    p = x / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z / d * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, c - h), min(1.0, c + h)

def newcombe(a, b, c, d, z=Z):
    n = a + b + c + d
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson(a + b, n, z)
    l2, u2 = wilson(a + c, n, z)
    m = (a + b) * (c + d) * (a + c) * (b + d)
    phi = 0.0
    if m > 0:
        ad = a * d - b * c
        if ad > n / 2:
            phi = (ad - n / 2) / math.sqrt(m)
        elif ad < 0:
            phi = ad / math.sqrt(m)
    delta = p1 - p2
    lo = delta - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    hi = delta + math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return max(-1.0, lo), min(1.0, hi)

def cp_upper(x, m, conf=0.95):
    if m == 0 or x >= m:
        return 1.0
    # P(X <= x; m, p) = 1 - conf, decreasing in p: bisect with exact sums.
    target = Fraction(1) - Fraction(conf).limit_denominator(1000)
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        q = Fraction(mid)
        cdf = sum(math.comb(m, i) * q ** i * (1 - q) ** (m - i) for i in range(x + 1))
        if cdf > target:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-17:
            break
    return (lo + hi) / 2

def ln_factorial(m):
    """ln m! to 50 digits: exactly below 2000, by Stirling's series above
    (its next term is below 1e-36 there)."""
    if m < 2000:
        return Decimal(math.factorial(m)).ln()
    m = Decimal(m)
    ln2pi = Decimal("1.8378770664093454835606594728112352797227949472756")
    return ((m + Decimal("0.5")) * m.ln() - m + ln2pi / 2 + 1 / (12 * m) - 1 / (360 * m ** 3)
            + 1 / (1260 * m ** 5) - 1 / (1680 * m ** 7) + 1 / (1188 * m ** 9))

def mcnemar_large(b, c):
    """McNemar's exact p for counts too large for exact integer sums: the
    top term C(n, k)/2^n from ln n! to 50 digits, then the terms below it by
    their exact ratio k/(n-k+1), until they add less than 1e-45."""
    getcontext().prec = 50
    n, k = b + c, min(b, c)
    if n - 2 * k <= 1:
        return 1.0
    term = (ln_factorial(n) - ln_factorial(k) - ln_factorial(n - k) - n * Decimal(2).ln()).exp()
    total = Decimal(0)
    for i in range(k, -1, -1):
        total += term
        if term < total * Decimal("1e-45"):
            break
        term = term * i / (n - i + 1)
    return float(min(Decimal(1), 2 * total))

tables = [(72, 75, 83, 70), (59, 6, 16, 80), (1, 1, 7, 12), (0, 0, 0, 10), (10, 0, 0, 0),
          (5, 3, 0, 2), (0, 7, 0, 0), (120, 30, 31, 119), (400, 0, 9, 91), (3, 40, 1, 2)]
out = {
    "z95": Z,
    "mcnemar": [[b, c, mcnemar(b, c)] for b, c in [(75, 83), (0, 0), (0, 1), (1, 1), (0, 12), (9, 1),
                                                     (30, 31), (200, 260), (1000, 1100)]],
    "mcnemar_large": [[b, c, mcnemar_large(b, c)] for b, c in [(5000, 5200), (249746, 250019), (1000000, 1003000),
                                                                 (3, 1000000), (500000000, 500040000),
                                                                 (2000000000, 2000100000)]],
    "wilson": [[x, n, *wilson(x, n)] for x, n in [(75, 300), (0, 10), (10, 10), (1, 2), (83, 300), (37, 1000)]],
    "newcombe": [[*t, *newcombe(*t)] for t in tables],
    "clopper_pearson_upper": [[x, m, cp_upper(x, m)] for x, m in [(0, 1), (0, 29), (0, 150), (1, 150), (3, 40), (5, 300), (40, 40)]],
}
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden.json"), "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
