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
--   t975(df)                       Student's t quantile t(0.975; df), df an
--                                  integer >= 1: the multiplier of the paired
--                                  t interval mean ± t975(n − 1)·s/√n
--   wilcoxon_p(t_plus, n, ties)    two-sided p of the Wilcoxon signed-rank
--                                  test from the rank sum of the positive
--                                  differences t_plus (tied |d| at their mean
--                                  rank), the number of nonzero differences n
--                                  and Σ(t³ − t) over the tie groups' sizes t:
--                                  scipy.stats.wilcoxon(d, zero_method="wilcox",
--                                  correction=False, method="approx"); NULL
--                                  when n = 0
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

-- Graded outcomes (a world that declares a score): each pair's score
-- difference d = treated − control. pipeline/analysis/stats (scores.go)
-- computes the same in Go; testdata/stats/gen_scores.py writes reference
-- values with SciPy, mpmath and statsmodels.
--
--
-- t975 reads a table for df 1 to 100 (40-digit roots of the t distribution
-- function, testdata/stats/scores.json) and above it the Cornish–Fisher
-- expansion to the fifth power of 1/df (Abramowitz and Stegun 26.7.5 and
-- its next term; error below 7e-13 from df 101 on).
CREATE OR REPLACE MACRO t975(df) AS
    CASE WHEN df IS NULL OR df < 1 THEN NULL
         WHEN df <= 100 THEN [
        12.706204736174705, 4.302652729749464, 3.1824463052837095, 2.7764451051977943, 2.5705818356363155,
        2.44691185114497, 2.3646242515927853, 2.3060041352041667, 2.2621571627982053, 2.228138851986275,
        2.2009851600916397, 2.178812829667229, 2.1603686564627926, 2.144786687917804, 2.1314495455597755,
        2.1199052992212546, 2.109815577833317, 2.1009220402410387, 2.0930240544083096, 2.085963447265865,
        2.0796138447276804, 2.0738730679040263, 2.0686576104190486, 2.063898561628026, 2.0595385527532977,
        2.055529438642873, 2.0518305164802855, 2.048407141795245, 2.0452296421327043, 2.042272456301238,
        2.0395134463964086, 2.036933343460102, 2.034515297449339, 2.032244509317719, 2.0301079282503434,
        2.028094000980451, 2.0261924630291097, 2.02439416391197, 2.0226909200367613, 2.0210753903062733,
        2.0195409704413763, 2.018081702818445, 2.0166921992278244, 2.015367574443764, 2.0141033888808466,
        2.012895598919429, 2.011740513729766, 2.0106347576242323, 2.0095752371292397, 2.008559112100761,
        2.007583770315836, 2.0066468050616884, 2.005745995317869, 2.004879288188057, 2.004044783289146,
        2.0032407188478722, 2.0024654592910074, 2.001717484145236, 2.000995378088268, 2.0002978220142604,
        1.9996235849949398, 1.998971517033379, 1.9983405425207417, 1.997729654317693, 1.997137908392004,
        1.996564418952312, 1.9960083540252966, 1.995468931429844, 1.994945415107238, 1.9944371117711865,
        1.9939433678456258, 1.9934635666618723, 1.9929971258898551, 1.9925434951809327, 1.992102154002242,
        1.9916726096446644, 1.991254395388385, 1.9908470688116908, 1.990450210230129, 1.9900634212544461,
        1.9896863234569029, 1.9893185571365726, 1.9889597801751628, 1.9886096669757092, 1.988267907477222,
        1.9879342062390206, 1.9876082815890712, 1.9872898648311697, 1.9869786995062815, 1.9866745407037683,
        1.9863771544186182, 1.9860863169511305, 1.9858018143458234, 1.9855234418666043, 1.9852510035054982,
        1.9849843115224575, 1.9847231860139847, 1.9844674545084817, 1.9842169515864174, 1.9839715185235522][CAST(df AS BIGINT)]
         ELSE 1.959963984540054::DOUBLE + 2.372271230298563 / df::DOUBLE + 2.8224986157396117 / pow(df::DOUBLE, 2)
              + 2.5558496795077232 / pow(df::DOUBLE, 3) + 1.5895340533938236 / pow(df::DOUBLE, 4) + 0.7328982119816057 / pow(df::DOUBLE, 5)
    END;

-- p = erfc(|z|/√2), z = (t_plus − n(n+1)/4) / √(n(n+1)(2n+1)/24 − ties/48);
-- erfc(x) by its Taylor series of erf below x = 2 (40 terms, the last under
-- 1e-23) and by its continued fraction (Abramowitz and Stegun 7.1.14, 100
-- levels, evaluated from the bottom) from 2 up: 13 digits or more at any z.
CREATE OR REPLACE MACRO wilcoxon_p(t_plus, n, ties) AS
    CASE WHEN n IS NULL OR n = 0 THEN NULL ELSE list_transform(
        [abs(t_plus::DOUBLE - n::DOUBLE * (n::DOUBLE + 1) / 4)
         / sqrt(n::DOUBLE * (n::DOUBLE + 1) * (2 * n::DOUBLE + 1) / 24 - ties::DOUBLE / 48) / sqrt(2)],
        lambda x: CASE WHEN x < 2
            THEN 1 - 2 / sqrt(pi()) * list_sum(list_transform(range(0, 40), lambda k:
                     CASE WHEN k % 2 = 0 THEN 1.0 ELSE -1.0 END * pow(x, 2 * k + 1) / (gamma(k + 1) * (2 * k + 1))))
            ELSE exp(-x * x) / (sqrt(pi()) * list_reduce(range(100, 0, -1), lambda f, k: x + (k / 2) / f, x)) END)[1]
    END;
