-- Where does each arm help and where does it harm? The summary's counts per
-- value of every pre-decision feature.
--
-- Inputs: pairs (views.sql), the macros of stats.sql.
-- Output: one row per configuration, fork step, treatment arm, feature and
--   value: config_id, fork_step, arm, feature, value, pairs, rescued,
--   harmed, unchanged, sure_thing, lost_cause, net, net_rate, net_lo,
--   net_hi (Newcombe 95%), mcnemar_p, rescue_lo, rescue_hi, harm_lo,
--   harm_hi (Wilson 95% for rescued / pairs and harmed / pairs). Numeric features are bucketed: repeat_run as
--   0, 1, 2, 3+; obs_value, steps_used and budget_left as their value up to
--   9, then 10+. The hidden_ columns are ground truth, never features, and
--   are not sliced here.
WITH features_long AS (
    SELECT config_id, fork_step, arm, quadrant, 1 AS feature_order, 'same_obs' AS feature,
           CAST(same_obs AS VARCHAR) AS value, CAST(same_obs AS INTEGER) AS value_order
    FROM pairs
    UNION ALL
    SELECT config_id, fork_step, arm, quadrant, 2, 'repeat_run',
           CASE WHEN repeat_run >= 3 THEN '3+' ELSE CAST(repeat_run AS VARCHAR) END,
           least(repeat_run, 3)
    FROM pairs
    UNION ALL
    SELECT config_id, fork_step, arm, quadrant, 3, 'obs_value',
           CASE WHEN obs_value >= 10 THEN '10+' ELSE CAST(obs_value AS VARCHAR) END,
           least(obs_value, 10)
    FROM pairs
    UNION ALL
    SELECT config_id, fork_step, arm, quadrant, 4, 'steps_used',
           CASE WHEN steps_used >= 10 THEN '10+' ELSE CAST(steps_used AS VARCHAR) END,
           least(steps_used, 10)
    FROM pairs
    UNION ALL
    SELECT config_id, fork_step, arm, quadrant, 5, 'budget_left',
           CASE WHEN budget_left >= 10 THEN '10+' ELSE CAST(budget_left AS VARCHAR) END,
           least(budget_left, 10)
    FROM pairs
),
counted AS (
    SELECT config_id, fork_step, arm, feature_order, feature, value_order, value,
           count(*)                                          AS pairs,
           count(*) FILTER (WHERE quadrant = 'persuadable')  AS rescued,
           count(*) FILTER (WHERE quadrant = 'sleeping_dog') AS harmed,
           count(*) FILTER (WHERE quadrant = 'sure_thing')   AS sure_thing,
           count(*) FILTER (WHERE quadrant = 'lost_cause')   AS lost_cause
    FROM features_long
    GROUP BY ALL
)
SELECT config_id, fork_step, arm, feature, value, pairs, rescued, harmed,
       sure_thing + lost_cause                              AS unchanged,
       sure_thing, lost_cause,
       rescued - harmed                                     AS net,
       (rescued - harmed) / pairs                           AS net_rate,
       newcombe_lo(sure_thing, rescued, harmed, lost_cause) AS net_lo,
       newcombe_hi(sure_thing, rescued, harmed, lost_cause) AS net_hi,
       mcnemar_p(rescued, harmed)                           AS mcnemar_p,
       wilson_lo(rescued, pairs)                            AS rescue_lo,
       wilson_hi(rescued, pairs)                            AS rescue_hi,
       wilson_lo(harmed, pairs)                             AS harm_lo,
       wilson_hi(harmed, pairs)                             AS harm_hi
FROM counted
ORDER BY config_id, fork_step, arm, feature_order, value_order;
