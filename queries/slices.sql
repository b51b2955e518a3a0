-- Where does each arm help and where does it harm? The summary's counts per
-- value of every pre-decision feature.
--
-- Inputs: pairs (views.sql).
-- Output: one row per configuration, fork step, treatment arm, feature and
--   value: config_id, fork_step, arm, feature, value, pairs, rescued,
--   harmed, unchanged, net. Numeric features are bucketed: repeat_run as
--   0, 1, 2, 3+; obs_value, steps_used and budget_left as their value up to
--   9, then 10+. The hidden_ columns are ground truth, never features, and
--   are not sliced here.
WITH features_long AS (
    SELECT config_id, fork_step, arm, label, 1 AS feature_order, 'same_obs' AS feature,
           CAST(same_obs AS VARCHAR) AS value, CAST(same_obs AS INTEGER) AS value_order
    FROM pairs
    UNION ALL
    SELECT config_id, fork_step, arm, label, 2, 'repeat_run',
           CASE WHEN repeat_run >= 3 THEN '3+' ELSE CAST(repeat_run AS VARCHAR) END,
           least(repeat_run, 3)
    FROM pairs
    UNION ALL
    SELECT config_id, fork_step, arm, label, 3, 'obs_value',
           CASE WHEN obs_value >= 10 THEN '10+' ELSE CAST(obs_value AS VARCHAR) END,
           least(obs_value, 10)
    FROM pairs
    UNION ALL
    SELECT config_id, fork_step, arm, label, 4, 'steps_used',
           CASE WHEN steps_used >= 10 THEN '10+' ELSE CAST(steps_used AS VARCHAR) END,
           least(steps_used, 10)
    FROM pairs
    UNION ALL
    SELECT config_id, fork_step, arm, label, 5, 'budget_left',
           CASE WHEN budget_left >= 10 THEN '10+' ELSE CAST(budget_left AS VARCHAR) END,
           least(budget_left, 10)
    FROM pairs
),
counted AS (
    SELECT config_id, fork_step, arm, feature_order, feature, value_order, value,
           count(*)                                    AS pairs,
           count(*) FILTER (WHERE label = 'rescued')   AS rescued,
           count(*) FILTER (WHERE label = 'harmed')    AS harmed,
           count(*) FILTER (WHERE label = 'unchanged') AS unchanged
    FROM features_long
    GROUP BY ALL
)
SELECT config_id, fork_step, arm, feature, value, pairs, rescued, harmed, unchanged,
       rescued - harmed AS net
FROM counted
ORDER BY config_id, fork_step, arm, feature_order, value_order;
