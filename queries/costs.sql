-- What does each arm cost, what does it cost beyond the control arm off, and
-- what does a net rescue cost?
--
-- Inputs: branches and pair_cells (the views of queries.Views). Only
--   branches and pairs with status 'ok' count. Cost fields a world does not
--   report are NULL in the tables and have no rows here.
-- Output: one row per configuration, fork step, arm (off included) and cost
--   field the world reports, in the order steps, tokens, usd, seconds:
--   config_id, fork_step, arm, cost ('steps', 'tokens', 'usd', 'seconds'),
--   branches        ok branches of the arm (replicas included),
--   mean            mean cost of one of them, from the fork to its end
--                   (the intervention included),
--   mean_off        the same for the control arm off,
--   pairs           ok pairs of the arm against off (NULL for off),
--   extra           mean over those pairs of the treatment's mean cost minus
--                   the control's (pairs' extra_<cost>): what the arm costs
--                   beyond off per run (NULL for off),
--   net             rescued − harmed of those pairs,
--   per_net_rescue  extra × pairs / net: the extra cost of one net rescue
--                   (NULL unless net > 0).
WITH branch_costs AS (
    SELECT config_id, fork_step, arm,
           count(*)           AS branches,
           avg(cost_steps)    AS steps,
           avg(cost_tokens)   AS tokens,
           -- Doubles summed as DECIMAL (to 10^-6): the same mean whatever
           -- order the threads add them in.
           CAST(avg(CAST(cost_usd AS DECIMAL(18, 6))) AS DOUBLE)     AS usd,
           CAST(avg(CAST(cost_seconds AS DECIMAL(18, 6))) AS DOUBLE) AS seconds
    FROM branches
    WHERE status = 'ok'
    GROUP BY ALL
),
pair_costs AS (
    SELECT config_id, fork_step, arm,
           sum(n)                                                                 AS pairs,
           coalesce(sum(n) FILTER (WHERE quadrant = 'persuadable'), 0)
             - coalesce(sum(n) FILTER (WHERE quadrant = 'sleeping_dog'), 0)      AS net,
           sum(extra_steps) AS steps, sum(extra_tokens) AS tokens,
           sum(extra_usd) AS usd, sum(extra_seconds) AS seconds
    FROM pair_cells
    WHERE status = 'ok'
    GROUP BY ALL
),
long_costs AS (
    SELECT b.config_id, b.fork_step, b.arm, b.branches, p.pairs, p.net,
           unnest([{'cost_order': 1, 'cost': 'steps',   'mean': b.steps,   'total_extra': p.steps},
                   {'cost_order': 2, 'cost': 'tokens',  'mean': b.tokens,  'total_extra': p.tokens},
                   {'cost_order': 3, 'cost': 'usd',     'mean': b.usd,     'total_extra': p.usd},
                   {'cost_order': 4, 'cost': 'seconds', 'mean': b.seconds, 'total_extra': p.seconds}]) AS c
    FROM branch_costs AS b
    LEFT JOIN pair_costs AS p USING (config_id, fork_step, arm)
)
SELECT l.config_id, l.fork_step, l.arm, l.c.cost AS cost,
       l.branches, l.c.mean AS mean, o.c.mean AS mean_off,
       CAST(l.pairs AS BIGINT) AS pairs,
       CAST(l.c.total_extra AS DOUBLE) / l.pairs AS extra,
       CAST(l.net AS BIGINT) AS net,
       CASE WHEN l.net > 0 THEN CAST(l.c.total_extra AS DOUBLE) / l.net END AS per_net_rescue
FROM long_costs AS l
LEFT JOIN long_costs AS o
  ON o.config_id = l.config_id AND o.fork_step = l.fork_step AND o.arm = 'off' AND o.c.cost = l.c.cost
WHERE l.c.mean IS NOT NULL
ORDER BY l.config_id, l.fork_step, list_position(['off', 'on', 'placebo', 'aa', 'policy'], l.arm) NULLS LAST, l.arm, l.c.cost_order;
