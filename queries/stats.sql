-- Statistics for paired outcomes, as DuckDB macros.
--
-- Question: none; this file defines the intervals and tests the reports use.
-- Inputs:   counts. Outputs: DOUBLE.
--   z95()                          Φ⁻¹(0.975), the two-sided 95% normal quantile
--   wilson_lo(x, n), wilson_hi     Wilson score interval for x successes in n
--                                  (Wilson, JASA 1927); [0, 1] when n = 0
--   mcnemar_p(b, c)                McNemar's exact two-sided p-value on the
--                                  discordant pairs: min(1, 2·P(X ≤ min(b, c))),
--                                  X ~ Bin(b + c, ½), each term by Loader's
--                                  saddle-point form
--   newcombe_phi(a, b, c, d)       φ, the correlation Newcombe's interval uses
--   newcombe_lo(a, b, c, d), _hi   95% interval for the paired difference
--                                  (a+b)/n − (a+c)/n with a = both succeed,
--                                  b = treatment only (rescued), c = control only
--                                  (harmed), d = neither: Newcombe's method 10
--                                  (Stat Med 1998) with the φ correction of
--                                  Newcombe & Altman (2000); [−1, 1] when n = 0
--
-- Exact at the boundaries and ordered: wilson_lo is 0 exactly for x = 0 and
-- wilson_hi 1 exactly for x = n, wilson_lo ≤ x / n ≤ wilson_hi; mcnemar_p is 1
-- exactly when |b − c| ≤ 1 and 2^(1 − n) when one count is 0; newcombe_lo ≤
-- (b − c) / n ≤ newcombe_hi within [−1, 1]. The Wilson lower bound is
-- x² / (n·(x + z²/2 + z·√(x(n − x)/n + z²/4))): the textbook
-- (x + z²/2 − z·√…)/(n + z²) without its cancellation (it gave 1.39e-17 for
-- x = 0, n = 17).
--
-- Every macro is self-contained — it calls no other macro — so that the
-- macros work in a database attached under any name (ATTACH 'results.duckdb'
-- AS forklab; SELECT forklab.mcnemar_p(75, 83)): DuckDB looks up a macro
-- called inside another macro in the default database, not the attached one.
-- pipeline/analysis/stats computes the same values in Go; the tests hold both to each
-- other, to testdata/stats/golden.json and to exact reference values.
CREATE OR REPLACE MACRO z95() AS 1.959963984540054::DOUBLE;

CREATE OR REPLACE MACRO wilson_lo(x, n) AS
    CASE WHEN n = 0 OR x = 0 THEN 0.0
         ELSE least(x::DOUBLE / n::DOUBLE,
                    x::DOUBLE * x::DOUBLE / (n::DOUBLE * (x::DOUBLE + 1.959963984540054::DOUBLE * 1.959963984540054::DOUBLE / 2
                        + 1.959963984540054::DOUBLE * sqrt(x::DOUBLE * (n::DOUBLE - x::DOUBLE) / n::DOUBLE
                                                            + 1.959963984540054::DOUBLE * 1.959963984540054::DOUBLE / 4))))
    END;
CREATE OR REPLACE MACRO wilson_hi(x, n) AS
    CASE WHEN n = 0 OR x = n THEN 1.0
         ELSE greatest(x::DOUBLE / n::DOUBLE, least(1.0,
                    (x::DOUBLE + 1.959963984540054::DOUBLE * 1.959963984540054::DOUBLE / 2
                        + 1.959963984540054::DOUBLE * sqrt(x::DOUBLE * (n::DOUBLE - x::DOUBLE) / n::DOUBLE
                                                            + 1.959963984540054::DOUBLE * 1.959963984540054::DOUBLE / 4))
                    / (n::DOUBLE + 1.959963984540054::DOUBLE * 1.959963984540054::DOUBLE)))
    END;

-- The tail sums the binomial terms from 7·√n + 30 below min(b, c) up (the
-- ones before add less than 1e-40 of the sum). Each term P(X = i), X ~
-- Bin(n, ½), is Loader's saddle-point form (C. Loader, "Fast and accurate
-- computation of binomial probabilities", 2000; R's dbinom_raw), as
-- pipeline/stats.BinomHalf computes it:
--   exp(st(n) − st(i) − st(n−i) − bd0(i, n/2) − bd0(n−i, n/2)) / √(2π·i·(n−i)/n)
-- with st the error of Stirling's formula and bd0(x, m) = x·ln(x/m) + m − x
-- (by its series near m). It keeps about 13 digits at any n, where a sum of
-- lgamma differences kept 9 at 10^6 discordant pairs and 6 at 10^9; its
-- cost grows with √n (a second or two at 10^9). s binds n and min(b, c)
-- once; k is −1 (no terms) where an earlier branch answers, as DuckDB folds
-- a constant ELSE branch even when it is not taken.
CREATE OR REPLACE MACRO mcnemar_p(b, c) AS
    CASE WHEN abs(b - c) <= 1 THEN 1.0
         WHEN least(b, c) = 0 THEN pow(2.0, greatest(1 - (b + c)::DOUBLE, -2000.0))
         ELSE list_transform([{'n': (b + c)::DOUBLE,
                               'k': CASE WHEN abs(b - c) <= 1 OR least(b, c) = 0 THEN -1 ELSE least(b, c)::BIGINT END}],
             lambda s: least(1.0, 2 * list_sum(list_transform(
             range(greatest(0, s.k - CAST(ceil(7 * sqrt(s.n)) AS BIGINT) - 30), s.k + 1),
             lambda i: CASE WHEN i = 0 THEN pow(2.0, greatest(-s.n, -2000.0)) ELSE exp(
                 list_transform([s.n, i::DOUBLE, s.n - i], lambda m:
                     CASE WHEN m > 500 THEN (1::DOUBLE / 12 - (1::DOUBLE / 360) / (m * m)) / m
                          WHEN m > 80 THEN (1::DOUBLE / 12 - ((1::DOUBLE / 360) - (1::DOUBLE / 1260) / (m * m)) / (m * m)) / m
                          WHEN m > 35 THEN (1::DOUBLE / 12 - ((1::DOUBLE / 360) - ((1::DOUBLE / 1260) - (1::DOUBLE / 1680) / (m * m)) / (m * m)) / (m * m)) / m
                          WHEN m > 15 THEN (1::DOUBLE / 12 - ((1::DOUBLE / 360) - ((1::DOUBLE / 1260) - ((1::DOUBLE / 1680) - (1::DOUBLE / 1188) / (m * m)) / (m * m)) / (m * m)) / (m * m)) / m
                          ELSE lgamma(m + 1) - (m + 0.5) * ln(m) + m - 0.5 * ln(2 * pi()) END)
                 .list_reduce(lambda acc, v: acc - v)
                 - list_sum(list_transform([i::DOUBLE, s.n - i], lambda y:
                     CASE WHEN abs(y - s.n / 2) < 0.1 * (y + s.n / 2)
                          THEN (y - s.n / 2) * ((y - s.n / 2) / (y + s.n / 2))
                               + 2 * y * list_sum(list_transform(range(1, 10), lambda j:
                                   pow((y - s.n / 2) / (y + s.n / 2), 2 * j + 1) / (2 * j + 1)))
                          ELSE y * ln(y / (s.n / 2)) + s.n / 2 - y END))
                 - 0.5 * (ln(2 * pi()) + ln(i::DOUBLE) + ln((s.n - i) / s.n))) END))))[1]
    END;

-- φ, the correlation of the two paired proportions, with AD − BC shrunk by
-- n/2 towards 0 (0 inside [0, n/2]); 0 when a margin is empty.
CREATE OR REPLACE MACRO newcombe_phi(a, b, c, d) AS
    CASE WHEN (a + b)::DOUBLE * (c + d) * (a + c) * (b + d) = 0 THEN 0.0
         WHEN (a::DOUBLE * d - b::DOUBLE * c) > (a + b + c + d) / 2
              THEN ((a::DOUBLE * d - b::DOUBLE * c) - (a + b + c + d) / 2) / sqrt((a + b)::DOUBLE * (c + d) * (a + c) * (b + d))
         WHEN (a::DOUBLE * d - b::DOUBLE * c) >= 0 THEN 0.0
         ELSE ((a::DOUBLE * d - b::DOUBLE * c)) / sqrt((a + b)::DOUBLE * (c + d) * (a + c) * (b + d)) END;

-- The interval binds its parts once: a one-element list and a lambda (macros
-- expand in place, so repeating the Wilson bounds would repeat their text and
-- slow binding down). s holds the counts, t the proportions p1, p2, the
-- estimate (b − c)/n, φ, and the Wilson bounds l1, u1, l2, u2 (as wilson_lo
-- and wilson_hi, written out: see the header).
CREATE OR REPLACE MACRO newcombe_lo(a, b, c, d) AS
    CASE WHEN a + b + c + d = 0 THEN -1.0 ELSE list_transform(
        [{'n': (a + b + c + d)::DOUBLE, 'x1': (a + b)::DOUBLE, 'x2': (a + c)::DOUBLE, 'e': (b - c)::DOUBLE,
          'phi': CASE WHEN (a + b)::DOUBLE * (c + d) * (a + c) * (b + d) = 0 THEN 0.0
                      WHEN (a::DOUBLE * d - b::DOUBLE * c) > (a + b + c + d) / 2
                           THEN ((a::DOUBLE * d - b::DOUBLE * c) - (a + b + c + d) / 2) / sqrt((a + b)::DOUBLE * (c + d) * (a + c) * (b + d))
                      WHEN (a::DOUBLE * d - b::DOUBLE * c) >= 0 THEN 0.0
                      ELSE ((a::DOUBLE * d - b::DOUBLE * c)) / sqrt((a + b)::DOUBLE * (c + d) * (a + c) * (b + d)) END}],
        lambda s: list_transform([{
            'p1': s.x1 / s.n, 'p2': s.x2 / s.n, 'delta': s.e / s.n, 'phi': s.phi,
            'l1': CASE WHEN s.x1 = 0 THEN 0.0 ELSE least(s.x1 / s.n, s.x1 * s.x1 / (s.n * (s.x1 + 1.959963984540054::DOUBLE * 1.959963984540054::DOUBLE / 2
                      + 1.959963984540054::DOUBLE * sqrt(s.x1 * (s.n - s.x1) / s.n + 1.959963984540054::DOUBLE * 1.959963984540054::DOUBLE / 4)))) END,
            'u2': CASE WHEN s.x2 = s.n THEN 1.0 ELSE greatest(s.x2 / s.n, least(1.0, (s.x2 + 1.959963984540054::DOUBLE * 1.959963984540054::DOUBLE / 2
                      + 1.959963984540054::DOUBLE * sqrt(s.x2 * (s.n - s.x2) / s.n + 1.959963984540054::DOUBLE * 1.959963984540054::DOUBLE / 4))
                      / (s.n + 1.959963984540054::DOUBLE * 1.959963984540054::DOUBLE))) END}],
            lambda t: greatest(-1.0, least(t.delta, t.delta - sqrt(greatest(0.0,
                power(t.p1 - t.l1, 2) - 2 * t.phi * (t.p1 - t.l1) * (t.u2 - t.p2) + power(t.u2 - t.p2, 2))))))[1])[1] END;
CREATE OR REPLACE MACRO newcombe_hi(a, b, c, d) AS
    CASE WHEN a + b + c + d = 0 THEN 1.0 ELSE list_transform(
        [{'n': (a + b + c + d)::DOUBLE, 'x1': (a + b)::DOUBLE, 'x2': (a + c)::DOUBLE, 'e': (b - c)::DOUBLE,
          'phi': CASE WHEN (a + b)::DOUBLE * (c + d) * (a + c) * (b + d) = 0 THEN 0.0
                      WHEN (a::DOUBLE * d - b::DOUBLE * c) > (a + b + c + d) / 2
                           THEN ((a::DOUBLE * d - b::DOUBLE * c) - (a + b + c + d) / 2) / sqrt((a + b)::DOUBLE * (c + d) * (a + c) * (b + d))
                      WHEN (a::DOUBLE * d - b::DOUBLE * c) >= 0 THEN 0.0
                      ELSE ((a::DOUBLE * d - b::DOUBLE * c)) / sqrt((a + b)::DOUBLE * (c + d) * (a + c) * (b + d)) END}],
        lambda s: list_transform([{
            'p1': s.x1 / s.n, 'p2': s.x2 / s.n, 'delta': s.e / s.n, 'phi': s.phi,
            'u1': CASE WHEN s.x1 = s.n THEN 1.0 ELSE greatest(s.x1 / s.n, least(1.0, (s.x1 + 1.959963984540054::DOUBLE * 1.959963984540054::DOUBLE / 2
                      + 1.959963984540054::DOUBLE * sqrt(s.x1 * (s.n - s.x1) / s.n + 1.959963984540054::DOUBLE * 1.959963984540054::DOUBLE / 4))
                      / (s.n + 1.959963984540054::DOUBLE * 1.959963984540054::DOUBLE))) END,
            'l2': CASE WHEN s.x2 = 0 THEN 0.0 ELSE least(s.x2 / s.n, s.x2 * s.x2 / (s.n * (s.x2 + 1.959963984540054::DOUBLE * 1.959963984540054::DOUBLE / 2
                      + 1.959963984540054::DOUBLE * sqrt(s.x2 * (s.n - s.x2) / s.n + 1.959963984540054::DOUBLE * 1.959963984540054::DOUBLE / 4)))) END}],
            lambda t: least(1.0, greatest(t.delta, t.delta + sqrt(greatest(0.0,
                power(t.u1 - t.p1, 2) - 2 * t.phi * (t.u1 - t.p1) * (t.p2 - t.l2) + power(t.p2 - t.l2, 2))))))[1])[1] END;
