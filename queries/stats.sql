-- Statistics for paired outcomes, as DuckDB macros.
--
-- Question: none; this file defines the intervals and tests the reports use.
-- Inputs:   counts. Outputs: DOUBLE.
--   z95()                          Φ⁻¹(0.975), the two-sided 95% normal quantile
--   wilson_lo(x, n), wilson_hi     Wilson score interval for x successes in n
--                                  (wilson_center and wilson_half are its parts)
--                                  (Wilson, JASA 1927); [0, 1] when n = 0
--   mcnemar_p(b, c)                McNemar's exact two-sided p-value on the
--                                  discordant pairs: min(1, 2·P(X ≤ min(b, c))),
--                                  X ~ Bin(b + c, ½), summed in log space
--   newcombe_lo(a, b, c, d), _hi   95% interval for the paired difference
--                                  (a+b)/n − (a+c)/n with a = both succeed,
--                                  b = treatment only (rescued), c = control only
--                                  (harmed), d = neither: Newcombe's method 10
--                                  (Stat Med 1998) with the φ correction of
--                                  Newcombe & Altman (2000); newcombe_parts
--                                  (a, b, c, d) holds the proportions, their
--                                  Wilson bounds and phi
-- pipeline/analysis/stats computes the same values in Go; the tests hold both to
-- testdata/stats/golden.json within 1e-9.
CREATE OR REPLACE MACRO z95() AS 1.959963984540054;

CREATE OR REPLACE MACRO wilson_center(x, n) AS
    (x / n + z95() * z95() / (2 * n)) / (1 + z95() * z95() / n);
CREATE OR REPLACE MACRO wilson_half(x, n) AS
    z95() / (1 + z95() * z95() / n)
        * sqrt((x / n) * (1 - x / n) / n + z95() * z95() / (4.0 * n * n));
CREATE OR REPLACE MACRO wilson_lo(x, n) AS
    CASE WHEN n = 0 THEN 0.0 ELSE greatest(0.0, wilson_center(x, n) - wilson_half(x, n)) END;
CREATE OR REPLACE MACRO wilson_hi(x, n) AS
    CASE WHEN n = 0 THEN 1.0 ELSE least(1.0, wilson_center(x, n) + wilson_half(x, n)) END;

CREATE OR REPLACE MACRO mcnemar_tail(b, c) AS
    2 * list_sum(list_transform(
        range(greatest(0, least(b, c) - CAST(ceil(20 * sqrt(b + c)) AS BIGINT) - 50), least(b, c) + 1),
        k -> exp(lgamma(b + c + 1) - lgamma(k + 1) - lgamma(b + c - k + 1) - (b + c) * ln(2))));
CREATE OR REPLACE MACRO mcnemar_p(b, c) AS
    CASE WHEN b + c = 0 OR mcnemar_tail(b, c) > 1 - 1e-12 THEN 1.0 ELSE mcnemar_tail(b, c) END;

-- φ, the correlation of the two paired proportions, with AD − BC shrunk by
-- n/2 towards 0 (0 inside [0, n/2]); 0 when a margin is empty.
CREATE OR REPLACE MACRO newcombe_phi(a, b, c, d) AS
    CASE WHEN (a + b)::DOUBLE * (c + d) * (a + c) * (b + d) = 0 THEN 0.0
         WHEN (a::DOUBLE * d - b::DOUBLE * c) > (a + b + c + d) / 2
              THEN ((a::DOUBLE * d - b::DOUBLE * c) - (a + b + c + d) / 2) / sqrt((a + b)::DOUBLE * (c + d) * (a + c) * (b + d))
         WHEN (a::DOUBLE * d - b::DOUBLE * c) >= 0 THEN 0.0
         ELSE ((a::DOUBLE * d - b::DOUBLE * c)) / sqrt((a + b)::DOUBLE * (c + d) * (a + c) * (b + d)) END;
-- The intervals bind their parts once (a one-element list and a lambda, as
-- macros expand textually: nesting the Wilson macros directly would repeat
-- them, and binding would take a tenth of a second).
CREATE OR REPLACE MACRO newcombe_parts(a, b, c, d) AS
    list_transform([{'n': a + b + c + d, 'x1': a + b, 'x2': a + c, 'phi': newcombe_phi(a, b, c, d)}],
        s -> {'p1': s.x1 / s.n, 'p2': s.x2 / s.n, 'phi': s.phi,
              'l1': wilson_lo(s.x1, s.n), 'u1': wilson_hi(s.x1, s.n),
              'l2': wilson_lo(s.x2, s.n), 'u2': wilson_hi(s.x2, s.n)})[1];
CREATE OR REPLACE MACRO newcombe_lo(a, b, c, d) AS
    CASE WHEN a + b + c + d = 0 THEN -1.0 ELSE list_transform([newcombe_parts(a, b, c, d)],
        t -> greatest(-1.0, (t.p1 - t.p2) - sqrt(greatest(0.0,
            power(t.p1 - t.l1, 2) - 2 * t.phi * (t.p1 - t.l1) * (t.u2 - t.p2) + power(t.u2 - t.p2, 2)))))[1] END;
CREATE OR REPLACE MACRO newcombe_hi(a, b, c, d) AS
    CASE WHEN a + b + c + d = 0 THEN 1.0 ELSE list_transform([newcombe_parts(a, b, c, d)],
        t -> least(1.0, (t.p1 - t.p2) + sqrt(greatest(0.0,
            power(t.u1 - t.p1, 2) - 2 * t.phi * (t.u1 - t.p1) * (t.p2 - t.l2) + power(t.p2 - t.l2, 2)))))[1] END;
