-- What does each arm do, overall, against the control arm off, and how sure
-- are we?
--
-- Inputs: pair_counts (the views of queries.Views: the pairs counted per
--   configuration, fork step, arm, status and quadrant, without the features
--   pair_groups and pair_cells keep, which the summary does not need and
--   which cost more to group than the counting), the macros of stats.sql.
--   Only pairs with status 'ok' are labelled and counted; pairs whose
--   checkpoint or any branch failed are counted apart, in errors.
-- Output: one row per configuration, fork step and treatment arm (in the
--   order on, placebo, aa, policy):
--   config_id, fork_step, arm,
--   pairs         labelled pairs compared (status 'ok'),
--   rescued       treatment succeeds, control fails (persuadables),
--   harmed        control succeeds, treatment fails (sleeping dogs),
--   unchanged     both the same; = sure_thing + lost_cause,
--   sure_thing    both succeed,
--   lost_cause    both fail,
--   net           rescued - harmed,
--   net_rate      net / pairs,
--   net_lo, net_hi        95% interval for net_rate (Newcombe, paired),
--   mcnemar_p             McNemar's exact two-sided p on rescued vs harmed,
--   rescue_rate, rescue_lo, rescue_hi   rescued / pairs, Wilson 95%,
--   harm_rate, harm_lo, harm_hi         harmed / pairs, Wilson 95%,
--   flip_rate, flip_lo, flip_hi         (rescued + harmed) / pairs, Wilson
--                 95%: for arm aa, the noise floor any rescue count must beat,
--   errors        pairs not labelled because their checkpoint or a branch
--                 of either side failed (status 'error').
WITH counted AS (
    SELECT config_id, fork_step, arm,
           CAST(coalesce(sum(n) FILTER (WHERE status = 'ok'), 0) AS BIGINT)                                AS pairs,
           CAST(coalesce(sum(n) FILTER (WHERE status = 'ok' AND quadrant = 'persuadable'), 0) AS BIGINT)  AS rescued,
           CAST(coalesce(sum(n) FILTER (WHERE status = 'ok' AND quadrant = 'sleeping_dog'), 0) AS BIGINT) AS harmed,
           CAST(coalesce(sum(n) FILTER (WHERE status = 'ok' AND quadrant = 'sure_thing'), 0) AS BIGINT)   AS sure_thing,
           CAST(coalesce(sum(n) FILTER (WHERE status = 'ok' AND quadrant = 'lost_cause'), 0) AS BIGINT)   AS lost_cause,
           CAST(coalesce(sum(n) FILTER (WHERE status <> 'ok'), 0) AS BIGINT)                              AS errors
    FROM pair_counts
    GROUP BY config_id, fork_step, arm
)
SELECT config_id, fork_step, arm, pairs, rescued, harmed,
       sure_thing + lost_cause                                 AS unchanged,
       sure_thing, lost_cause,
       rescued - harmed                                        AS net,
       (rescued - harmed) / pairs                              AS net_rate,
       newcombe_lo(sure_thing, rescued, harmed, lost_cause)    AS net_lo,
       newcombe_hi(sure_thing, rescued, harmed, lost_cause)    AS net_hi,
       mcnemar_p(rescued, harmed)                              AS mcnemar_p,
       rescued / pairs                                         AS rescue_rate,
       wilson_lo(rescued, pairs)                               AS rescue_lo,
       wilson_hi(rescued, pairs)                               AS rescue_hi,
       harmed / pairs                                          AS harm_rate,
       wilson_lo(harmed, pairs)                                AS harm_lo,
       wilson_hi(harmed, pairs)                                AS harm_hi,
       (rescued + harmed) / pairs                              AS flip_rate,
       wilson_lo(rescued + harmed, pairs)                      AS flip_lo,
       wilson_hi(rescued + harmed, pairs)                      AS flip_hi,
       errors
FROM counted
ORDER BY config_id, fork_step, list_position(['off', 'on', 'placebo', 'aa', 'policy'], arm) NULLS LAST, arm;
