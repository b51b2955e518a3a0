-- How much net gain does recovery bring as it fires on more runs, best runs
-- first? The uplift (Qini) curve of the always-on arm on held-out seeds.
--
-- Inputs: pairs of arm 'on' (views.sql) of one configuration; variables
--   config_id [0] and holdout [0.3] as in policy_search.sql (same split).
-- Score: each held-out pair is scored by the net rate (rescued − harmed) /
--   pairs of its feature cell (equal same_obs, repeat_run, obs_value,
--   steps_used, budget_left) on the search seeds — a lookup-table uplift
--   model; cells unseen in the search set score 0. Pairs fire best score
--   first (ties by seed, then fork step).
-- Output: eleven rows, firing rate 0, 0.1, …, 1:
--   fire_rate, fired (pairs fired), rescued, harmed, net (cumulative
--   rescued − harmed among fired pairs), random_net (net expected from
--   firing the same share at random: fire_rate × total net),
--   qini (the Qini coefficient: area between the curve and the random line
--   with both axes as shares of held-out pairs, i.e. the mean over firing
--   rates of (net − random_net) / pairs; the same on every row).
WITH settings AS (
    SELECT coalesce(getvariable('config_id'), 0) AS config_id,
           coalesce(getvariable('holdout'), 0.3) AS holdout
),
split_pairs AS (
    SELECT p.*,
           CASE WHEN ((p.seed::HUGEINT * 2654435761) % 4294967296) / 4294967296.0 < s.holdout
                THEN 'holdout' ELSE 'search' END AS split,
           CASE p.label WHEN 'rescued' THEN 1 WHEN 'harmed' THEN -1 ELSE 0 END AS gain
    FROM pairs AS p, settings AS s
    WHERE p.arm = 'on' AND p.config_id = s.config_id
),
cell_scores AS (
    SELECT same_obs, repeat_run, obs_value, steps_used, budget_left, avg(gain) AS score
    FROM split_pairs WHERE split = 'search'
    GROUP BY ALL
),
held_out_ordered AS (
    SELECT row_number() OVER (ORDER BY coalesce(c.score, 0) DESC, h.seed, h.fork_step) AS k,
           count(*) OVER () AS m, h.gain
    FROM split_pairs AS h
    LEFT JOIN cell_scores AS c USING (same_obs, repeat_run, obs_value, steps_used, budget_left)
    WHERE h.split = 'holdout'
),
curve AS (
    SELECT k, m,
           sum(CASE WHEN gain = 1 THEN 1 ELSE 0 END) OVER (ORDER BY k)  AS rescued,
           sum(CASE WHEN gain = -1 THEN 1 ELSE 0 END) OVER (ORDER BY k) AS harmed,
           sum(gain) OVER (ORDER BY k)                                  AS net,
           sum(gain) OVER ()                                            AS total_net
    FROM held_out_ordered
),
area AS (
    SELECT coalesce(sum(net - k * total_net / m) / (max(m) * max(m)), 0) AS qini FROM curve
),
deciles AS (
    SELECT i / 10.0 AS fire_rate FROM range(0, 11) AS r(i)
)
SELECT d.fire_rate,
       coalesce(c.k, 0)                                AS fired,
       coalesce(c.rescued, 0)                          AS rescued,
       coalesce(c.harmed, 0)                           AS harmed,
       coalesce(c.net, 0)                              AS net,
       d.fire_rate * coalesce((SELECT max(total_net) FROM curve), 0) AS random_net,
       a.qini
FROM deciles AS d
LEFT JOIN curve AS c ON c.k = round(d.fire_rate * c.m), area AS a
ORDER BY d.fire_rate;
