-- Which guard trigger keeps the most rescues while its harms stay within a
-- cap? For every configuration and fork step, candidates are chosen on the
-- search seeds and judged on held-out ones.
--
-- Inputs: pair_cells, feature_buckets and feature_catalog (the views of
--   queries.Views, which also make the split: a seed is held out when
--   ((seed × 2654435761) mod 2^32) / 2^32 < holdout, variable holdout,
--   default 0.3), restricted to the always-on arm 'on' and to pairs with
--   status 'ok'. Variables (SET VARIABLE name = value; defaults in brackets):
--     max_harm    the cap on harms [0]
--     harm_scope  'clean': the cap counts harms on clean runs only, runs whose
--                 fault flag (the declared hidden field pairs carry as fault)
--                 is false, or every harm when the world declares none (the
--                 seed's cap); 'all': every harm ['clean']
-- Candidates, per configuration and fork step: every condition on one
--   feature, every conjunction of two conditions on different features, and
--   the baselines always and never. Conditions compare a feature with the
--   buckets it takes (feature_bins): = for every value of a bool, an enum
--   or a number sliced by value, != for every value of an enum that takes
--   three or more, >= and <= for a number sliced by value, >= the lower edge
--   and < the upper edge of a quantile bucket. Conditions true of every
--   pair are left out ("always" in disguise), and so are conjunctions that
--   fire on no pair. A missing (null) value satisfies no condition.
--   Where a trigger does not fire the pair is unchanged by construction: a
--   trigger keeps the rescues and lets through the harms of the pairs it
--   fires on, and pays their extra cost.
-- Method: the cells are summed per feature bucket (one-feature grid) and
--   per pair of features' buckets (two-feature grid) before any condition
--   is applied, so the work grows with the buckets, not with the pairs.
-- Output: one row per configuration, fork step and candidate, best first:
--   config_id, fork_step, rank, chosen (the best candidate, within the cap),
--   trigger (readable: "same_obs = true AND repeat_run >= 2"), conditions
--   (0, 1 or 2), feature_1, op_1, value_1, feature_2, op_2, value_2 (value as
--   text: 'true', '3', '0.25', 'stale'), within_cap,
--   search_pairs, search_fires, search_rescued, search_harmed,
--   search_harmed_clean, search_net, search_extra_steps, search_extra_tokens,
--   search_extra_usd, search_extra_seconds (the extra cost summed over the
--   pairs it fires on: pairs' extra_<cost>; NULL where not reported), and
--   the same for holdout_.
--   Ranking: within the cap before over it; then most search rescues; then
--   the simpler trigger (fewer conditions); then fewer search harms; then
--   the lower search extra cost (usd, tokens, steps, seconds, each rounded
--   to 6 decimals, so that sums of the same pairs in another order tie);
--   then the
--   feature order of the declaration, the operator order =, !=, >=, <=, and
--   the value.
WITH settings AS (
    SELECT coalesce(getvariable('max_harm'), 0)         AS max_harm,
           coalesce(getvariable('harm_scope'), 'clean') AS harm_scope
),
on_cells AS (
    SELECT config_id, fork_step, split, profile,
           n                                                                          AS fires,
           CASE WHEN label = 'rescued' THEN n ELSE 0 END                              AS rescued,
           CASE WHEN label = 'harmed' THEN n ELSE 0 END                               AS harmed,
           CASE WHEN label = 'harmed' AND NOT coalesce(fault, false) THEN n ELSE 0 END AS harmed_clean,
           extra_steps, extra_tokens, extra_usd, extra_seconds
    FROM pair_cells
    WHERE arm = 'on' AND status = 'ok'
),
-- The one-feature grid: each feature's buckets, summed.
grid_1 AS (
    SELECT config_id, fork_step, split, feature_order, key,
           CAST(sum(fires) AS BIGINT) AS fires, CAST(sum(rescued) AS BIGINT) AS rescued,
           CAST(sum(harmed) AS BIGINT) AS harmed, CAST(sum(harmed_clean) AS BIGINT) AS harmed_clean,
           sum(extra_steps) AS extra_steps, sum(extra_tokens) AS extra_tokens,
           sum(extra_usd) AS extra_usd, sum(extra_seconds) AS extra_seconds
    FROM (SELECT * EXCLUDE (profile), CAST(generate_subscripts(profile, 1) AS INTEGER) AS feature_order,
                 unnest(profile) AS key
          FROM on_cells)
    GROUP BY ALL
),
feature_pairs AS (
    SELECT a.feature_order AS feature_order_1, b.feature_order AS feature_order_2
    FROM feature_catalog AS a
    JOIN feature_catalog AS b ON a.feature_order < b.feature_order
),
-- The two-feature grid: each pair of features' buckets, summed.
grid_2 AS (
    SELECT c.config_id, c.fork_step, c.split, f.feature_order_1, c.profile[f.feature_order_1] AS key_1,
           f.feature_order_2, c.profile[f.feature_order_2] AS key_2,
           CAST(sum(c.fires) AS BIGINT) AS fires, CAST(sum(c.rescued) AS BIGINT) AS rescued,
           CAST(sum(c.harmed) AS BIGINT) AS harmed, CAST(sum(c.harmed_clean) AS BIGINT) AS harmed_clean,
           sum(c.extra_steps) AS extra_steps, sum(c.extra_tokens) AS extra_tokens,
           sum(c.extra_usd) AS extra_usd, sum(c.extra_seconds) AS extra_seconds
    FROM on_cells AS c, feature_pairs AS f
    GROUP BY ALL
),
totals AS (
    SELECT config_id, fork_step,
           CAST(coalesce(sum(fires) FILTER (WHERE split = 'search'), 0) AS BIGINT)  AS search_pairs,
           CAST(coalesce(sum(fires) FILTER (WHERE split = 'holdout'), 0) AS BIGINT) AS holdout_pairs
    FROM on_cells
    GROUP BY ALL
),
bucket_ranges AS (
    SELECT config_id, fork_step, feature_order, min(key) AS lo, max(key) AS hi, count(DISTINCT key) AS keys
    FROM grid_1
    WHERE key IS NOT NULL
    GROUP BY ALL
),
ops AS (
    SELECT * FROM (VALUES ('=', 1), ('!=', 2), ('>=', 3), ('<=', 4)) AS o(op, op_order)
),
-- Conditions on the buckets each feature takes; >= its lowest and <= its
-- highest bucket hold everywhere and are left out.
conditions AS (
    SELECT DISTINCT g.config_id, g.fork_step, g.feature_order, b.feature, o.op, o.op_order, g.key,
           CASE WHEN o.op = '<=' AND NOT b.by_value THEN '<' ELSE o.op END AS rule_op,
           CASE WHEN b.by_value THEN b.label
                WHEN o.op = '>=' THEN CASE WHEN g.key = trunc(g.key) AND abs(g.key) < 1e15 THEN CAST(CAST(g.key AS BIGINT) AS VARCHAR) ELSE CAST(g.key AS VARCHAR) END
                ELSE CASE WHEN b.hi = trunc(b.hi) AND abs(b.hi) < 1e15 THEN CAST(CAST(b.hi AS BIGINT) AS VARCHAR) ELSE CAST(b.hi AS VARCHAR) END
           END AS rule_value
    FROM grid_1 AS g
    JOIN bucket_ranges AS r USING (config_id, fork_step, feature_order)
    JOIN feature_buckets AS b USING (config_id, fork_step, feature_order, key)
    CROSS JOIN ops AS o
    WHERE (o.op = '=' AND b.by_value)
       OR (o.op = '!=' AND b.type = 'enum' AND r.keys > 2)
       OR (o.op = '>=' AND b.type IN ('int', 'float') AND g.key > r.lo)
       OR (o.op = '<=' AND b.type IN ('int', 'float') AND g.key < r.hi)
),
numbered AS (
    SELECT row_number() OVER (ORDER BY c.config_id, c.fork_step, c.feature_order, c.op_order, c.key) AS cond, c.*,
           t.search_pairs + t.holdout_pairs AS group_pairs
    FROM conditions AS c
    JOIN totals AS t USING (config_id, fork_step)
),
-- A condition holds on a bucket when (op, key) says so; a null bucket
-- satisfies none.
single_hits AS (
    SELECT c.cond AS cond_1, CAST(NULL AS BIGINT) AS cond_2, g.split,
           CAST(sum(g.fires) AS BIGINT) AS fires, CAST(sum(g.rescued) AS BIGINT) AS rescued,
           CAST(sum(g.harmed) AS BIGINT) AS harmed, CAST(sum(g.harmed_clean) AS BIGINT) AS harmed_clean,
           sum(g.extra_steps) AS extra_steps, sum(g.extra_tokens) AS extra_tokens,
           sum(g.extra_usd) AS extra_usd, sum(g.extra_seconds) AS extra_seconds
    FROM numbered AS c
    JOIN grid_1 AS g
      ON g.config_id = c.config_id AND g.fork_step = c.fork_step AND g.feature_order = c.feature_order
     AND ((c.op = '=' AND g.key = c.key) OR (c.op = '!=' AND g.key <> c.key)
       OR (c.op = '>=' AND g.key >= c.key) OR (c.op = '<=' AND g.key <= c.key))
    GROUP BY ALL
),
-- Conditions that hold on every pair of their configuration and fork step
-- are "always" in disguise, and so add nothing to a conjunction either.
useful AS (
    SELECT c.*
    FROM numbered AS c
    JOIN (SELECT cond_1, sum(fires) AS fires FROM single_hits GROUP BY cond_1) AS h ON h.cond_1 = c.cond
    WHERE h.fires < c.group_pairs
),
pair_hits AS (
    SELECT c1.cond AS cond_1, c2.cond AS cond_2, g.split,
           CAST(sum(g.fires) AS BIGINT) AS fires, CAST(sum(g.rescued) AS BIGINT) AS rescued,
           CAST(sum(g.harmed) AS BIGINT) AS harmed, CAST(sum(g.harmed_clean) AS BIGINT) AS harmed_clean,
           sum(g.extra_steps) AS extra_steps, sum(g.extra_tokens) AS extra_tokens,
           sum(g.extra_usd) AS extra_usd, sum(g.extra_seconds) AS extra_seconds
    FROM grid_2 AS g
    JOIN useful AS c1
      ON c1.config_id = g.config_id AND c1.fork_step = g.fork_step AND c1.feature_order = g.feature_order_1
     AND ((c1.op = '=' AND g.key_1 = c1.key) OR (c1.op = '!=' AND g.key_1 <> c1.key)
       OR (c1.op = '>=' AND g.key_1 >= c1.key) OR (c1.op = '<=' AND g.key_1 <= c1.key))
    JOIN useful AS c2
      ON c2.config_id = g.config_id AND c2.fork_step = g.fork_step AND c2.feature_order = g.feature_order_2
     AND ((c2.op = '=' AND g.key_2 = c2.key) OR (c2.op = '!=' AND g.key_2 <> c2.key)
       OR (c2.op = '>=' AND g.key_2 >= c2.key) OR (c2.op = '<=' AND g.key_2 <= c2.key))
    GROUP BY ALL
),
-- Every candidate's counts on each split, one row per split and source:
-- the conditions and conjunctions (cond_1, cond_2) from their hits, and
-- the baselines (trigger: always fires on every pair of its configuration
-- and fork step, never on none — its counts are zeroed in all_candidates)
-- from the pairs of arm on themselves.
split_rows AS (
    SELECT cond_1, cond_2, split, fires, rescued, harmed, harmed_clean,
           extra_steps, extra_tokens, extra_usd, extra_seconds
    FROM (SELECT * FROM single_hits UNION ALL SELECT * FROM pair_hits)
    UNION ALL BY NAME
    SELECT config_id, fork_step, b.trigger, b.kind, split, fires, rescued, harmed, harmed_clean,
           extra_steps, extra_tokens, extra_usd, extra_seconds
    FROM on_cells, (VALUES ('always', 1), ('never', 0)) AS b(trigger, kind)
),
-- The same counts side by side, search seeds then held-out seeds: one row
-- per candidate.
by_split AS (
    SELECT cond_1, cond_2, config_id, fork_step, trigger, kind,
           CAST(coalesce(sum(fires) FILTER (WHERE split = 'search'), 0) AS BIGINT)         AS search_fires,
           CAST(coalesce(sum(rescued) FILTER (WHERE split = 'search'), 0) AS BIGINT)       AS search_rescued,
           CAST(coalesce(sum(harmed) FILTER (WHERE split = 'search'), 0) AS BIGINT)        AS search_harmed,
           CAST(coalesce(sum(harmed_clean) FILTER (WHERE split = 'search'), 0) AS BIGINT)  AS search_harmed_clean,
           sum(extra_steps) FILTER (WHERE split = 'search')                AS search_extra_steps,
           sum(extra_tokens) FILTER (WHERE split = 'search')               AS search_extra_tokens,
           sum(extra_usd) FILTER (WHERE split = 'search')                  AS search_extra_usd,
           sum(extra_seconds) FILTER (WHERE split = 'search')              AS search_extra_seconds,
           CAST(coalesce(sum(fires) FILTER (WHERE split = 'holdout'), 0) AS BIGINT)        AS holdout_fires,
           CAST(coalesce(sum(rescued) FILTER (WHERE split = 'holdout'), 0) AS BIGINT)      AS holdout_rescued,
           CAST(coalesce(sum(harmed) FILTER (WHERE split = 'holdout'), 0) AS BIGINT)       AS holdout_harmed,
           CAST(coalesce(sum(harmed_clean) FILTER (WHERE split = 'holdout'), 0) AS BIGINT) AS holdout_harmed_clean,
           sum(extra_steps) FILTER (WHERE split = 'holdout')               AS holdout_extra_steps,
           sum(extra_tokens) FILTER (WHERE split = 'holdout')              AS holdout_extra_tokens,
           sum(extra_usd) FILTER (WHERE split = 'holdout')                 AS holdout_extra_usd,
           sum(extra_seconds) FILTER (WHERE split = 'holdout')             AS holdout_extra_seconds
    FROM split_rows
    GROUP BY cond_1, cond_2, config_id, fork_step, trigger, kind
),
scored AS (
    SELECT * EXCLUDE (config_id, fork_step, trigger, kind)
    FROM by_split
    WHERE trigger IS NULL
),
baselines AS (
    SELECT config_id, fork_step, trigger, kind, CASE WHEN kind = 1 THEN 1 ELSE 0 END AS k,
           * EXCLUDE (cond_1, cond_2, config_id, fork_step, trigger, kind)
    FROM by_split
    WHERE trigger IS NOT NULL
),
all_candidates AS (
    SELECT c1.config_id, c1.fork_step,
           c1.feature || ' ' || c1.rule_op || ' ' || c1.rule_value
             || coalesce(' AND ' || c2.feature || ' ' || c2.rule_op || ' ' || c2.rule_value, '') AS trigger,
           CASE WHEN s.cond_2 IS NULL THEN 1 ELSE 2 END AS conditions,
           c1.feature AS feature_1, c1.rule_op AS op_1, c1.rule_value AS value_1,
           c2.feature AS feature_2, c2.rule_op AS op_2, c2.rule_value AS value_2,
           c1.group_pairs,
           c1.feature_order AS order_1, c1.op_order AS order_2, c1.key AS order_3,
           coalesce(c2.feature_order, 0) AS order_4, coalesce(c2.op_order, 0) AS order_5, coalesce(c2.key, 0) AS order_6,
           s.* EXCLUDE (cond_1, cond_2)
    FROM scored AS s
    JOIN numbered AS c1 ON c1.cond = s.cond_1
    LEFT JOIN numbered AS c2 ON c2.cond = s.cond_2
    UNION ALL
    SELECT config_id, fork_step, trigger, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, -kind, 0, 0, 0, 0, 0,
           search_fires * k, search_rescued * k, search_harmed * k, search_harmed_clean * k,
           search_extra_steps * k, search_extra_tokens * k, search_extra_usd * k, search_extra_seconds * k,
           holdout_fires * k, holdout_rescued * k, holdout_harmed * k, holdout_harmed_clean * k,
           holdout_extra_steps * k, holdout_extra_tokens * k, holdout_extra_usd * k, holdout_extra_seconds * k
    FROM baselines
),
judged AS (
    SELECT a.*, t.search_pairs, t.holdout_pairs,
           CASE WHEN st.harm_scope = 'all' THEN a.search_harmed ELSE a.search_harmed_clean END <= st.max_harm AS within_cap
    FROM (SELECT * FROM all_candidates
          -- A condition or conjunction that fires on every pair is
          -- "always" in disguise.
          WHERE conditions = 0 OR search_fires + holdout_fires < group_pairs) AS a
    JOIN totals AS t USING (config_id, fork_step), settings AS st
),
ranked AS (
    SELECT row_number() OVER (PARTITION BY config_id, fork_step
                              ORDER BY within_cap DESC, search_rescued DESC, conditions, search_harmed,
                                       round(coalesce(search_extra_usd, 0), 6), round(coalesce(search_extra_tokens, 0), 6),
                                       round(coalesce(search_extra_steps, 0), 6), round(coalesce(search_extra_seconds, 0), 6),
                                       order_1, order_2, order_3, order_4, order_5, order_6) AS rank, *
    FROM judged
)
SELECT config_id, fork_step, rank,
       rank = 1 AND within_cap AS chosen,
       trigger, conditions, feature_1, op_1, value_1, feature_2, op_2, value_2, within_cap,
       CAST(search_pairs AS BIGINT) AS search_pairs, CAST(search_fires AS BIGINT) AS search_fires,
       CAST(search_rescued AS BIGINT) AS search_rescued, CAST(search_harmed AS BIGINT) AS search_harmed,
       CAST(search_harmed_clean AS BIGINT) AS search_harmed_clean,
       CAST(search_rescued - search_harmed AS BIGINT) AS search_net,
       CAST(search_extra_steps AS DOUBLE) AS search_extra_steps, CAST(search_extra_tokens AS DOUBLE) AS search_extra_tokens,
       CAST(search_extra_usd AS DOUBLE) AS search_extra_usd, CAST(search_extra_seconds AS DOUBLE) AS search_extra_seconds,
       CAST(holdout_pairs AS BIGINT) AS holdout_pairs, CAST(holdout_fires AS BIGINT) AS holdout_fires,
       CAST(holdout_rescued AS BIGINT) AS holdout_rescued, CAST(holdout_harmed AS BIGINT) AS holdout_harmed,
       CAST(holdout_harmed_clean AS BIGINT) AS holdout_harmed_clean,
       CAST(holdout_rescued - holdout_harmed AS BIGINT) AS holdout_net,
       CAST(holdout_extra_steps AS DOUBLE) AS holdout_extra_steps, CAST(holdout_extra_tokens AS DOUBLE) AS holdout_extra_tokens,
       CAST(holdout_extra_usd AS DOUBLE) AS holdout_extra_usd, CAST(holdout_extra_seconds AS DOUBLE) AS holdout_extra_seconds
FROM ranked
ORDER BY config_id, fork_step, rank;
