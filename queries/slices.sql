-- Where does each arm help and where does it harm? The summary's counts for
-- every bucket of every pre-decision feature the world declares.
--
-- Inputs: pair_cells and feature_buckets (the views of queries.Views), the
--   macros of stats.sql. Only pairs with status 'ok' count. A bool or enum
--   feature is sliced by value, and so is an int whose values span fewer
--   than 12 integers; any other number by quantile buckets (feature_bins
--   says which, with the edges). The hidden_ columns are ground truth, never features, and are
--   not sliced here. A feature with one bucket in a configuration, fork
--   step and arm (steps_used at a fixed fork step) is constant there: its
--   one slice would repeat the headline, so it has none.
-- Output: one row per configuration, fork step, treatment arm, feature and
--   bucket, in declaration order and bucket order: config_id, fork_step,
--   arm, feature, value (the value, or the bucket with its edges: '< 12',
--   '[12, 40)', '>= 40'; 'null' for a missing value), lo, hi (a numeric
--   bucket's edges: lo <= x < hi; lo = the value when sliced by value;
--   hi NULL for the last bucket; both NULL for bool and enum), pairs,
--   rescued, harmed, unchanged, sure_thing, lost_cause, net, net_rate,
--   net_lo, net_hi (Newcombe 95%), mcnemar_p, rescue_lo, rescue_hi,
--   harm_lo, harm_hi (Wilson 95% for rescued / pairs and harmed / pairs).
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
varied AS (
    -- The features with more than one bucket in their configuration, fork
    -- step and arm: the ones that say where the arm helps.
    SELECT config_id, fork_step, arm, feature_order
    FROM counted
    GROUP BY ALL
    HAVING count(*) > 1
)
SELECT c.config_id, c.fork_step, c.arm, b.feature, b.label AS value,
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
       wilson_hi(c.harmed, c.pairs)                                 AS harm_hi
FROM counted AS c
SEMI JOIN varied AS v USING (config_id, fork_step, arm, feature_order)
JOIN feature_buckets AS b
  ON b.config_id = c.config_id AND b.fork_step = c.fork_step AND b.feature_order = c.feature_order
 AND b.key IS NOT DISTINCT FROM c.key
ORDER BY c.config_id, c.fork_step, list_position(['off', 'on', 'placebo', 'aa', 'policy'], c.arm) NULLS LAST, c.arm, c.feature_order, c.key NULLS LAST;
