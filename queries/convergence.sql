-- How do the counts and their intervals change with the number of replicas
-- voted and the number of seeds? (For noisy sweeps: with a greedy model every
-- replica is the same and only the seeds matter.)
--
-- Inputs: branches and tasks (the views of queries.Views), the macros of
--   stats.sql. Replicas voted: k = 1, 3, 5, … up to the sweep's replicas,
--   the first k replicas of each arm, labelled by strict majority (odd k: no
--   ties), as the sweep labels pairs. A pair counts only when the first k
--   replicas of both sides finished (status 'ok'). Seeds: the first n runs
--   of each configuration — in seed order, the first n seeds of its range;
--   a recorded population's runs in order of seed, then run_id — n = 100,
--   300, 1000, 3000, … below its total, and all of them.
-- Output: one row per configuration, fork step, treatment arm, k and n:
--   config_id, fork_step, arm, replicas_voted, seeds, rescued, harmed,
--   unchanged, net, net_rate, net_lo, net_hi (Newcombe 95%), ci_width
--   (net_hi − net_lo), mcnemar_p.
WITH ranked AS (
    SELECT config_id, run_id, row_number() OVER (PARTITION BY config_id ORDER BY seed, run_id) - 1 AS rank
    FROM tasks
),
first_seeds AS (
    SELECT config_id, count(*) AS total FROM ranked GROUP BY config_id
),
replica_counts AS (
    SELECT range AS k FROM range(1, (SELECT max(replica) + 2 FROM branches), 2)
),
seed_counts AS (
    SELECT f.config_id, v.n
    FROM first_seeds AS f,
         (VALUES (100), (300), (1000), (3000), (10000), (30000), (100000), (300000),
                 (1000000), (3000000)) AS v(n)
    WHERE v.n < f.total
    UNION
    SELECT config_id, total FROM first_seeds
),
votes AS (
    SELECT b.config_id, b.fork_step, b.run_id, b.arm, r.k,
           2 * count(*) FILTER (WHERE b.status = 'ok' AND b.success) > r.k AS success,
           count(*) FILTER (WHERE b.status = 'ok') = r.k                    AS complete
    FROM branches AS b
    JOIN replica_counts AS r ON b.replica < r.k
    GROUP BY b.config_id, b.fork_step, b.run_id, b.arm, r.k
),
paired AS (
    SELECT t.config_id, t.fork_step, t.run_id, t.arm, t.k,
           c.success AS control, t.success AS treatment
    FROM votes AS t
    JOIN votes AS c ON c.config_id = t.config_id AND c.fork_step = t.fork_step
                   AND c.run_id = t.run_id AND c.k = t.k AND c.arm = 'off'
    WHERE t.arm <> 'off' AND t.complete AND c.complete
),
counted AS (
    SELECT p.config_id, p.fork_step, p.arm, p.k AS replicas_voted, n.n AS seeds,
           count(*) FILTER (WHERE p.treatment AND NOT p.control)     AS rescued,
           count(*) FILTER (WHERE p.control AND NOT p.treatment)     AS harmed,
           count(*) FILTER (WHERE p.control AND p.treatment)         AS sure_thing,
           count(*) FILTER (WHERE NOT p.control AND NOT p.treatment) AS lost_cause,
           count(*)                                                  AS pairs
    FROM paired AS p
    JOIN ranked AS r ON r.config_id = p.config_id AND r.run_id = p.run_id
    JOIN seed_counts AS n ON n.config_id = p.config_id AND r.rank < n.n
    GROUP BY ALL
)
SELECT config_id, fork_step, arm, replicas_voted, seeds, rescued, harmed,
       sure_thing + lost_cause                                AS unchanged,
       rescued - harmed                                       AS net,
       (rescued - harmed) / pairs                             AS net_rate,
       newcombe_lo(sure_thing, rescued, harmed, lost_cause)   AS net_lo,
       newcombe_hi(sure_thing, rescued, harmed, lost_cause)   AS net_hi,
       newcombe_hi(sure_thing, rescued, harmed, lost_cause)
         - newcombe_lo(sure_thing, rescued, harmed, lost_cause) AS ci_width,
       mcnemar_p(rescued, harmed)                             AS mcnemar_p
FROM counted
ORDER BY config_id, fork_step, list_position(['off', 'on', 'placebo', 'aa', 'policy'], arm) NULLS LAST, arm, replicas_voted, seeds;
