-- What does each arm do, overall, against the control arm off?
--
-- Inputs: pairs (views.sql).
-- Output: one row per configuration, fork step and treatment arm:
--   config_id, fork_step, arm,
--   pairs        pairs compared,
--   rescued      treatment succeeds, control fails (persuadables),
--   harmed       control succeeds, treatment fails (sleeping dogs),
--   unchanged    both the same; = sure_thing + lost_cause,
--   sure_thing   both succeed,
--   lost_cause   both fail,
--   net          rescued - harmed,
--   net_rate     net / pairs.
WITH counted AS (
    SELECT config_id, fork_step, arm,
           count(*)                                    AS pairs,
           count(*) FILTER (WHERE label = 'rescued')   AS rescued,
           count(*) FILTER (WHERE label = 'harmed')    AS harmed,
           count(*) FILTER (WHERE label = 'unchanged') AS unchanged,
           count(*) FILTER (WHERE quadrant = 'sure_thing') AS sure_thing,
           count(*) FILTER (WHERE quadrant = 'lost_cause') AS lost_cause
    FROM pairs
    GROUP BY config_id, fork_step, arm
)
SELECT config_id, fork_step, arm, pairs, rescued, harmed, unchanged,
       sure_thing, lost_cause,
       rescued - harmed                          AS net,
       round((rescued - harmed) / pairs, 4)      AS net_rate
FROM counted
ORDER BY config_id, fork_step, arm;
