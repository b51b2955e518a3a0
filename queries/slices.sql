-- Where does each arm help and where does it harm? The summary's counts for
-- every bucket of every pre-decision feature the world declares.
--
-- Inputs: pair_cells and feature_buckets (the views of queries.Views), the
--   macros of stats.sql. Only pairs with status 'ok' count. A bool or enum
--   feature is sliced by value, and so is an int whose values span fewer
--   than 12 integers; any other number by quantile buckets (feature_bins
--   says which, with the edges). The hidden_ columns are ground truth, never features, and are
--   not sliced here.
-- Output: one row per configuration, fork step, treatment arm, feature and
--   bucket, in declaration order and bucket order: config_id, fork_step,
--   arm, feature, value (the value, or the bucket with its edges: '< 12',
--   '[12, 40)', '>= 40'; 'null' for a missing value), lo, hi (a numeric
--   bucket's edges: lo <= x < hi; lo = the value when sliced by value;
--   hi NULL for the last bucket; both NULL for bool and enum), pairs,
--   rescued, harmed, unchanged, sure_thing, lost_cause, net, net_rate,
--   net_lo, net_hi (Newcombe 95%), mcnemar_p, rescue_lo, rescue_hi,
--   harm_lo, harm_hi (Wilson 95% for rescued / pairs and harmed / pairs),
--   mcnemar_p_adj (mcnemar_p adjusted for the multiple comparisons: Holm's
--   step-down method over the slices of one configuration, fork step and
--   arm — every feature and bucket — which bounds the chance of any false
--   positive among them, whatever their dependence), and for a world that
--   declares a score (NULL otherwise) the summary's mean_score_diff,
--   score_diff_lo, score_diff_hi (paired t 95%), wilcoxon_p, wilcoxon_n
--   over the slice's pairs, with wilcoxon_p_adj (Holm, as mcnemar_p_adj,
--   over the slices with a Wilcoxon p).
WITH cell_keys AS (
    -- One row per cell and feature: the cell's bucket of that feature.
    SELECT config_id, fork_step, arm, quadrant, n,
           CAST(generate_subscripts(profile, 1) AS INTEGER) AS feature_order,
           unnest(profile) AS key
    FROM pair_cells
    WHERE status = 'ok'
),
counted AS (
    SELECT config_id, fork_step, arm, feature_order, key,
           CAST(sum(n) AS BIGINT)                                                  AS pairs,
           CAST(coalesce(sum(n) FILTER (WHERE quadrant = 'persuadable'), 0) AS BIGINT)  AS rescued,
           CAST(coalesce(sum(n) FILTER (WHERE quadrant = 'sleeping_dog'), 0) AS BIGINT) AS harmed,
           CAST(coalesce(sum(n) FILTER (WHERE quadrant = 'sure_thing'), 0) AS BIGINT)   AS sure_thing,
           CAST(coalesce(sum(n) FILTER (WHERE quadrant = 'lost_cause'), 0) AS BIGINT)   AS lost_cause
    FROM cell_keys
    GROUP BY ALL
),
-- Score differences per slice (score_cells), as summary.sql computes them
-- per arm: the frequency table of d, its mean and spread summed in the
-- order of d, and the Wilcoxon rank sum summed exactly.
score_keys AS (
    SELECT config_id, fork_step, arm, score_diff, n,
           CAST(generate_subscripts(profile, 1) AS INTEGER) AS feature_order,
           unnest(profile) AS key
    FROM score_cells
),
score_counted AS (
    SELECT config_id, fork_step, arm, feature_order, key, score_diff, sum(n) AS n
    FROM score_keys
    GROUP BY ALL
),
score_mean AS (
    SELECT config_id, fork_step, arm, feature_order, key, CAST(sum(n) AS BIGINT) AS score_pairs,
           list_sum(list(n * score_diff ORDER BY score_diff)) / sum(n) AS mean_d
    FROM score_counted
    GROUP BY ALL
),
score_spread AS (
    SELECT s.config_id, s.fork_step, s.arm, s.feature_order, s.key,
           list_sum(list(s.n * (s.score_diff - m.mean_d) * (s.score_diff - m.mean_d) ORDER BY s.score_diff)) AS ss
    FROM score_counted AS s
    JOIN score_mean AS m
      ON m.config_id = s.config_id AND m.fork_step = s.fork_step AND m.arm = s.arm AND m.feature_order = s.feature_order
     AND m.key IS NOT DISTINCT FROM s.key
    GROUP BY s.config_id, s.fork_step, s.arm, s.feature_order, s.key
),
score_ranks AS (
    SELECT config_id, fork_step, arm, feature_order, key, abs(score_diff) AS a, sum(n) AS c,
           coalesce(sum(n) FILTER (WHERE score_diff > 0), 0) AS pos
    FROM score_counted
    WHERE score_diff <> 0
    GROUP BY config_id, fork_step, arm, feature_order, key, abs(score_diff)
),
wilcoxon AS (
    SELECT config_id, fork_step, arm, feature_order, key,
           CAST(sum(CAST(pos AS HUGEINT) * (2 * before + c + 1)) AS DOUBLE) / 2 AS t_plus,
           CAST(sum(c) AS BIGINT) AS n,
           CAST(sum(CAST(c AS HUGEINT) * c * c - c) AS DOUBLE) AS ties
    FROM (SELECT *, coalesce(sum(c) OVER (PARTITION BY config_id, fork_step, arm, feature_order, key ORDER BY a
                                          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
          FROM score_ranks)
    GROUP BY config_id, fork_step, arm, feature_order, key
),
scored AS (
    SELECT m.config_id, m.fork_step, m.arm, m.feature_order, m.key, m.mean_d,
           CASE WHEN m.score_pairs >= 2 THEN m.mean_d - t975(m.score_pairs - 1) * sqrt(s.ss / (m.score_pairs - 1) / m.score_pairs) END AS lo,
           CASE WHEN m.score_pairs >= 2 THEN m.mean_d + t975(m.score_pairs - 1) * sqrt(s.ss / (m.score_pairs - 1) / m.score_pairs) END AS hi,
           wilcoxon_p(w.t_plus, w.n, w.ties) AS wilcoxon_p,
           coalesce(w.n, 0) AS wilcoxon_n
    FROM score_mean AS m
    JOIN score_spread AS s
      ON s.config_id = m.config_id AND s.fork_step = m.fork_step AND s.arm = m.arm AND s.feature_order = m.feature_order
     AND s.key IS NOT DISTINCT FROM m.key
    LEFT JOIN wilcoxon AS w
      ON w.config_id = m.config_id AND w.fork_step = m.fork_step AND w.arm = m.arm AND w.feature_order = m.feature_order
     AND w.key IS NOT DISTINCT FROM m.key
),
sliced AS (
SELECT c.config_id, c.fork_step, c.arm, c.feature_order, c.key, b.feature, b.label AS value,
       CASE WHEN b.type IN ('int', 'float') THEN c.key END  AS lo,
       CASE WHEN b.by_value AND b.type IN ('int', 'float') THEN c.key ELSE b.hi END AS hi,
       c.pairs, c.rescued, c.harmed,
       c.sure_thing + c.lost_cause                                  AS unchanged,
       c.sure_thing, c.lost_cause,
       c.rescued - c.harmed                                         AS net,
       (c.rescued - c.harmed) / c.pairs                             AS net_rate,
       newcombe_lo(c.sure_thing, c.rescued, c.harmed, c.lost_cause) AS net_lo,
       newcombe_hi(c.sure_thing, c.rescued, c.harmed, c.lost_cause) AS net_hi,
       mcnemar_p(c.rescued, c.harmed)                               AS mcnemar_p,
       wilson_lo(c.rescued, c.pairs)                                AS rescue_lo,
       wilson_hi(c.rescued, c.pairs)                                AS rescue_hi,
       wilson_lo(c.harmed, c.pairs)                                 AS harm_lo,
       wilson_hi(c.harmed, c.pairs)                                 AS harm_hi,
       sc.mean_d                                                    AS mean_score_diff,
       sc.lo                                                        AS score_diff_lo,
       sc.hi                                                        AS score_diff_hi,
       sc.wilcoxon_p,
       sc.wilcoxon_n
FROM counted AS c
JOIN feature_buckets AS b
  ON b.config_id = c.config_id AND b.fork_step = c.fork_step AND b.feature_order = c.feature_order
 AND b.key IS NOT DISTINCT FROM c.key
LEFT JOIN scored AS sc
  ON sc.config_id = c.config_id AND sc.fork_step = c.fork_step AND sc.arm = c.arm AND sc.feature_order = c.feature_order
 AND sc.key IS NOT DISTINCT FROM c.key
),
-- Holm's step-down adjustment over the slices of one configuration, fork
-- step and arm: with the p-values ascending (ties in slice order), the
-- j-th of m becomes the running maximum of min(1, (m − j + 1)·p).
ranked AS (
    SELECT *,
           count(mcnemar_p) OVER arm_slices AS m_mc,
           row_number() OVER (arm_slices ORDER BY mcnemar_p NULLS LAST, feature_order, key NULLS LAST) AS j_mc,
           count(wilcoxon_p) OVER arm_slices AS m_wx,
           row_number() OVER (arm_slices ORDER BY wilcoxon_p NULLS LAST, feature_order, key NULLS LAST) AS j_wx
    FROM sliced
    WINDOW arm_slices AS (PARTITION BY config_id, fork_step, arm)
)
SELECT config_id, fork_step, arm, feature, value, lo, hi, pairs, rescued, harmed, unchanged, sure_thing, lost_cause,
       net, net_rate, net_lo, net_hi, mcnemar_p,
       CASE WHEN mcnemar_p IS NOT NULL THEN max(least(1.0, (m_mc - j_mc + 1) * mcnemar_p))
            OVER (PARTITION BY config_id, fork_step, arm ORDER BY j_mc ROWS UNBOUNDED PRECEDING) END AS mcnemar_p_adj,
       rescue_lo, rescue_hi, harm_lo, harm_hi,
       mean_score_diff, score_diff_lo, score_diff_hi, wilcoxon_p,
       CASE WHEN wilcoxon_p IS NOT NULL THEN max(least(1.0, (m_wx - j_wx + 1) * wilcoxon_p))
            OVER (PARTITION BY config_id, fork_step, arm ORDER BY j_wx ROWS UNBOUNDED PRECEDING) END AS wilcoxon_p_adj,
       wilcoxon_n
FROM ranked
ORDER BY config_id, fork_step, list_position(['off', 'on', 'placebo', 'aa', 'policy'], arm) NULLS LAST, arm, feature_order, key NULLS LAST;
