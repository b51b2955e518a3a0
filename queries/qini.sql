-- How much net gain does recovery bring as it fires on more runs, best runs
-- first? For every configuration and fork step, the uplift (Qini) curve of
-- the always-on arm on the held-out seeds.
--
-- Inputs: pair_cells (the views of queries.Views, which make the split as
--   policy_search.sql reads it: variable holdout, default 0.3), arm 'on',
--   pairs with status 'ok'.
-- Score: each bucket profile (the buckets of every feature, as slices and
--   policy_search.sql cut them) is scored by its net rate (rescued − harmed)
--   / pairs on the search seeds — a lookup-table uplift model; profiles
--   unseen there score 0. Held-out pairs fire best score first. Pairs of
--   equal score cannot be told apart, so they fire together, in proportion:
--   between the boundaries of equal-score groups the curve is a straight
--   line (the mean over every order of the tied pairs), and rescued, harmed
--   and net can be fractional there.
-- Output: per configuration and fork step, eleven rows, firing rate 0, 0.1,
--   …, 1: config_id, fork_step, fire_rate, fired (held-out pairs fired:
--   round(fire_rate × held-out pairs)), rescued, harmed, net (rescued −
--   harmed among them), random_net (net expected from firing the same
--   share at random: fire_rate × total net), and
--   qini, the Qini coefficient of the whole curve (the same on each row of
--   a configuration and fork step): the area between the curve and the
--   random line, both axes as shares of the held-out pairs — positive when
--   the score ranks rescues before harms, 0 for a random ranking.
WITH on_cells AS (
    SELECT config_id, fork_step, split, profile, n,
           CASE WHEN label = 'rescued' THEN n ELSE 0 END AS rescued,
           CASE WHEN label = 'harmed' THEN n ELSE 0 END  AS harmed
    FROM pair_cells
    WHERE arm = 'on' AND status = 'ok'
),
scores AS (
    SELECT config_id, fork_step, profile, (sum(rescued) - sum(harmed)) / sum(n) AS score
    FROM on_cells
    WHERE split = 'search'
    GROUP BY ALL
),
-- Held-out pairs grouped by score: each group fires as one.
score_groups AS (
    SELECT h.config_id, h.fork_step, coalesce(s.score, 0) AS score,
           sum(h.n) AS n, sum(h.rescued) AS rescued, sum(h.harmed) AS harmed
    FROM on_cells AS h
    LEFT JOIN scores AS s USING (config_id, fork_step, profile)
    WHERE h.split = 'holdout'
    GROUP BY ALL
),
-- Cumulative counts at the end of each group, best score first.
curve AS (
    SELECT config_id, fork_step, n, rescued, harmed,
           sum(n) OVER w                 AS x1,
           sum(rescued) OVER w           AS rescued1,
           sum(harmed) OVER w            AS harmed1,
           sum(n) OVER g                 AS m,
           sum(rescued - harmed) OVER g  AS total_net
    FROM score_groups
    WINDOW w AS (PARTITION BY config_id, fork_step ORDER BY score DESC ROWS UNBOUNDED PRECEDING),
           g AS (PARTITION BY config_id, fork_step)
),
segments AS (
    SELECT *, x1 - n AS x0, rescued1 - rescued AS rescued0, harmed1 - harmed AS harmed0 FROM curve
),
-- The area under the straight segments minus the random line's, over m².
area AS (
    SELECT config_id, fork_step,
           sum((x1 - x0) * ((rescued0 - harmed0) + (rescued1 - harmed1)) / 2
               - total_net / m * (x1 * x1 - x0 * x0) / 2) / (max(m) * max(m)) AS qini,
           max(m) AS m, max(total_net) AS total_net
    FROM segments
    GROUP BY ALL
),
deciles AS (
    SELECT a.config_id, a.fork_step, a.m, a.total_net, a.qini, r.i / 10.0 AS fire_rate, round(r.i / 10.0 * a.m) AS fired
    FROM area AS a, range(0, 11) AS r(i)
)
SELECT d.config_id, d.fork_step, d.fire_rate, CAST(d.fired AS BIGINT) AS fired,
       coalesce(s.rescued0 + (d.fired - s.x0) / s.n * s.rescued, 0)                         AS rescued,
       coalesce(s.harmed0 + (d.fired - s.x0) / s.n * s.harmed, 0)                           AS harmed,
       coalesce((s.rescued0 - s.harmed0) + (d.fired - s.x0) / s.n * (s.rescued - s.harmed), 0) AS net,
       d.fire_rate * d.total_net + 0.0                                                      AS random_net,
       d.qini
FROM deciles AS d
LEFT JOIN segments AS s
  ON s.config_id = d.config_id AND s.fork_step = d.fork_step AND d.fired > s.x0 AND d.fired <= s.x1
ORDER BY d.config_id, d.fork_step, d.fire_rate;
