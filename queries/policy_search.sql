-- Which guard trigger keeps the most rescues while its harms stay within a
-- cap? Candidates are chosen on the search seeds and judged on held-out ones.
--
-- Inputs: pairs of the always-on arm 'on' (views.sql), restricted to one
--   configuration; fork steps are pooled (steps_used tells them apart).
--   Variables (SET VARIABLE name = value; defaults in brackets):
--     config_id   the configuration searched [0]
--     max_harm    the cap on harms [0]
--     harm_scope  'clean': the cap counts harms on clean runs only, runs whose
--                 hidden truth is "no fault" (the seed's cap); 'all': every
--                 harm ['clean']
--     holdout     share of seeds held out [0.3]. A seed is held out when
--                 ((seed × 2654435761) mod 2^32) / 2^32 < holdout (Knuth's
--                 multiplicative hash), so the split is stable across runs.
-- Candidates: every pre-decision feature compared with each value it takes
--   (= for booleans; =, >=, <= for numbers; conditions true everywhere are
--   left out), every conjunction of two such conditions on different
--   features, and the baselines always and never.
--   Where a trigger does not fire the pair is unchanged by construction: a
--   trigger keeps the rescues and lets through the harms of the pairs it
--   fires on.
-- Output: one row per candidate, best first:
--   rank, chosen (the best candidate within the cap), trigger (readable),
--   conditions (0, 1 or 2), feature_1, op_1, value_1, feature_2, op_2,
--   value_2, within_cap,
--   search_pairs, search_fires, search_rescued, search_harmed,
--   search_harmed_clean, search_net,
--   holdout_pairs, holdout_fires, holdout_rescued, holdout_harmed,
--   holdout_harmed_clean, holdout_net.
--   Ranking: within the cap before over it; then most search rescues; then
--   the simpler trigger (fewer conditions); then fewer search harms; then the
--   feature order same_obs, repeat_run, obs_value, steps_used, budget_left,
--   the operator order =, >=, <=, and the value.
WITH settings AS (
    SELECT coalesce(getvariable('config_id'), 0)          AS config_id,
           coalesce(getvariable('max_harm'), 0)           AS max_harm,
           coalesce(getvariable('harm_scope'), 'clean')   AS harm_scope,
           coalesce(getvariable('holdout'), 0.3)          AS holdout
),
split_pairs AS (
    SELECT p.*,
           CASE WHEN ((p.seed::HUGEINT * 2654435761) % 4294967296) / 4294967296.0 < s.holdout
                THEN 'holdout' ELSE 'search' END AS split
    FROM pairs AS p, settings AS s
    WHERE p.arm = 'on' AND p.config_id = s.config_id
),
-- Pairs with equal features, label, truth and split behave alike: count
-- them once.
cells AS (
    SELECT row_number() OVER () AS cell, same_obs, repeat_run, obs_value, steps_used, budget_left,
           split, label, hidden_fault, count(*) AS n
    FROM split_pairs
    GROUP BY ALL
),
cell_features AS (
    SELECT cell, 1 AS feature_order, 'same_obs' AS feature, CAST(same_obs AS INTEGER) AS value FROM cells
    UNION ALL SELECT cell, 2, 'repeat_run', repeat_run FROM cells
    UNION ALL SELECT cell, 3, 'obs_value', obs_value FROM cells
    UNION ALL SELECT cell, 4, 'steps_used', steps_used FROM cells
    UNION ALL SELECT cell, 5, 'budget_left', budget_left FROM cells
),
ops AS (
    SELECT * FROM (VALUES ('=', 1), ('>=', 2), ('<=', 3)) AS o(op, op_order)
),
feature_ranges AS (
    SELECT feature, min(value) AS lo, max(value) AS hi FROM cell_features GROUP BY feature
),
-- Conditions that hold everywhere (x >= min, x <= max, x = v when v is the
-- only value) are left out: they are "always" in disguise.
conditions AS (
    SELECT DISTINCT f.feature_order, f.feature, o.op, o.op_order, f.value
    FROM cell_features AS f
    JOIN feature_ranges AS r USING (feature), ops AS o
    WHERE (f.feature <> 'same_obs' OR o.op = '=')
      AND r.lo < r.hi
      AND NOT (o.op = '>=' AND f.value = r.lo)
      AND NOT (o.op = '<=' AND f.value = r.hi)
),
numbered_conditions AS (
    SELECT row_number() OVER (ORDER BY feature_order, op_order, value) AS cond, *
    FROM conditions
),
condition_hits AS (
    SELECT c.cond, c.feature_order, f.cell
    FROM numbered_conditions AS c
    JOIN cell_features AS f USING (feature)
    WHERE (c.op = '=' AND f.value = c.value)
       OR (c.op = '>=' AND f.value >= c.value)
       OR (c.op = '<=' AND f.value <= c.value)
),
candidate_hits AS (
    SELECT cond AS cond_1, NULL::BIGINT AS cond_2, cell FROM condition_hits
    UNION ALL
    SELECT h1.cond, h2.cond, h1.cell
    FROM condition_hits AS h1
    JOIN condition_hits AS h2 ON h1.cell = h2.cell AND h1.feature_order < h2.feature_order
),
candidates AS (
    SELECT DISTINCT cond_1, cond_2 FROM candidate_hits
),
scored AS (
    SELECT k.cond_1, k.cond_2,
           sum(c.n) FILTER (WHERE c.split = 'search')                                             AS search_fires,
           sum(c.n) FILTER (WHERE c.split = 'search' AND c.label = 'rescued')                     AS search_rescued,
           sum(c.n) FILTER (WHERE c.split = 'search' AND c.label = 'harmed')                      AS search_harmed,
           sum(c.n) FILTER (WHERE c.split = 'search' AND c.label = 'harmed' AND NOT c.hidden_fault) AS search_harmed_clean,
           sum(c.n) FILTER (WHERE c.split = 'holdout')                                            AS holdout_fires,
           sum(c.n) FILTER (WHERE c.split = 'holdout' AND c.label = 'rescued')                    AS holdout_rescued,
           sum(c.n) FILTER (WHERE c.split = 'holdout' AND c.label = 'harmed')                     AS holdout_harmed,
           sum(c.n) FILTER (WHERE c.split = 'holdout' AND c.label = 'harmed' AND NOT c.hidden_fault) AS holdout_harmed_clean
    FROM candidates AS k
    LEFT JOIN candidate_hits AS h ON h.cond_1 = k.cond_1 AND h.cond_2 IS NOT DISTINCT FROM k.cond_2
    LEFT JOIN cells AS c ON c.cell = h.cell
    GROUP BY k.cond_1, k.cond_2
),
-- always fires on every pair; never on none.
baselines AS (
    SELECT 'always' AS trigger, 1 AS kind,
           sum(n) FILTER (WHERE split = 'search')                                             AS search_fires,
           sum(n) FILTER (WHERE split = 'search' AND label = 'rescued')                       AS search_rescued,
           sum(n) FILTER (WHERE split = 'search' AND label = 'harmed')                        AS search_harmed,
           sum(n) FILTER (WHERE split = 'search' AND label = 'harmed' AND NOT hidden_fault)   AS search_harmed_clean,
           sum(n) FILTER (WHERE split = 'holdout')                                            AS holdout_fires,
           sum(n) FILTER (WHERE split = 'holdout' AND label = 'rescued')                      AS holdout_rescued,
           sum(n) FILTER (WHERE split = 'holdout' AND label = 'harmed')                       AS holdout_harmed,
           sum(n) FILTER (WHERE split = 'holdout' AND label = 'harmed' AND NOT hidden_fault)  AS holdout_harmed_clean
    FROM cells
    UNION ALL
    SELECT 'never', 0, 0, 0, 0, 0, 0, 0, 0, 0
),
totals AS (
    SELECT count(*) FILTER (WHERE split = 'search')  AS search_pairs,
           count(*) FILTER (WHERE split = 'holdout') AS holdout_pairs
    FROM split_pairs
),
all_candidates AS (
    SELECT CASE WHEN s.cond_2 IS NULL
                THEN c1.feature || ' ' || c1.op || ' ' || CASE WHEN c1.feature = 'same_obs' THEN CASE WHEN c1.value = 1 THEN 'true' ELSE 'false' END ELSE CAST(c1.value AS VARCHAR) END
                ELSE c1.feature || ' ' || c1.op || ' ' || CASE WHEN c1.feature = 'same_obs' THEN CASE WHEN c1.value = 1 THEN 'true' ELSE 'false' END ELSE CAST(c1.value AS VARCHAR) END
                     || ' AND ' || c2.feature || ' ' || c2.op || ' ' || CAST(c2.value AS VARCHAR)
           END AS trigger,
           CASE WHEN s.cond_2 IS NULL THEN 1 ELSE 2 END AS conditions,
           c1.feature AS feature_1, c1.op AS op_1, c1.value AS value_1,
           c2.feature AS feature_2, c2.op AS op_2, c2.value AS value_2,
           c1.feature_order * 1000000 + c1.op_order * 100000 + c1.value AS order_1,
           coalesce(c2.feature_order * 1000000 + c2.op_order * 100000 + c2.value, 0) AS order_2,
           coalesce(s.search_fires, 0) AS search_fires, coalesce(s.search_rescued, 0) AS search_rescued,
           coalesce(s.search_harmed, 0) AS search_harmed, coalesce(s.search_harmed_clean, 0) AS search_harmed_clean,
           coalesce(s.holdout_fires, 0) AS holdout_fires, coalesce(s.holdout_rescued, 0) AS holdout_rescued,
           coalesce(s.holdout_harmed, 0) AS holdout_harmed, coalesce(s.holdout_harmed_clean, 0) AS holdout_harmed_clean
    FROM scored AS s
    JOIN numbered_conditions AS c1 ON c1.cond = s.cond_1
    LEFT JOIN numbered_conditions AS c2 ON c2.cond = s.cond_2
    UNION ALL
    SELECT trigger, 0, NULL, NULL, NULL, NULL, NULL, NULL, -kind, 0,
           coalesce(search_fires, 0), coalesce(search_rescued, 0), coalesce(search_harmed, 0),
           coalesce(search_harmed_clean, 0), coalesce(holdout_fires, 0), coalesce(holdout_rescued, 0),
           coalesce(holdout_harmed, 0), coalesce(holdout_harmed_clean, 0)
    FROM baselines
),
judged AS (
    SELECT a.*, t.search_pairs, t.holdout_pairs,
           CASE WHEN st.harm_scope = 'all' THEN a.search_harmed ELSE a.search_harmed_clean END <= st.max_harm AS within_cap
    FROM all_candidates AS a, totals AS t, settings AS st
),
ranked AS (
    SELECT row_number() OVER (ORDER BY within_cap DESC, search_rescued DESC, conditions, search_harmed,
                                       order_1, order_2) AS rank, *
    FROM judged
)
SELECT rank,
       rank = 1 AND within_cap AS chosen,
       trigger, conditions, feature_1, op_1, value_1, feature_2, op_2, value_2, within_cap,
       search_pairs, search_fires, search_rescued, search_harmed, search_harmed_clean,
       search_rescued - search_harmed AS search_net,
       holdout_pairs, holdout_fires, holdout_rescued, holdout_harmed, holdout_harmed_clean,
       holdout_rescued - holdout_harmed AS holdout_net
FROM ranked
ORDER BY rank;
