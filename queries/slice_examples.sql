-- Which pairs show each slice? The first rescued and the first harmed
-- pairs (by seed, then run id) of every bucket of every pre-decision
-- feature, for forklab show and the HTML report, which links them to
-- their views.
--
-- Inputs: example_cells and feature_buckets (the views of queries.Views):
--   the rescued and harmed pairs with status 'ok', grouped by their
--   features' buckets, each group with its first two runs ({seed, run_id},
--   by seed, then run_id); buckets are the slices' (slices.sql).
-- Output: one row per configuration, fork step, treatment arm, feature,
--   bucket and label that has such pairs: config_id, fork_step, arm,
--   feature, value (the bucket's label, as slices.sql names it), label
--   ('rescued' or 'harmed'), seeds (its first two runs' seeds, ascending;
--   NULL for a recorded run without one), run_ids (the same runs' ids: a
--   seed population's are its seeds in decimal), in slices.sql's order.
WITH cell_keys AS (
    -- One row per cell and feature: the cell's bucket of that feature.
    SELECT config_id, fork_step, arm, label, runs,
           CAST(generate_subscripts(profile, 1) AS INTEGER) AS feature_order,
           unnest(profile) AS key
    FROM example_cells
),
first_runs AS (
    -- A bucket's first two runs are the first two of its cells'.
    SELECT config_id, fork_step, arm, label, feature_order, key,
           list_slice(list_sort(flatten(list(runs))), 1, 2) AS runs
    FROM cell_keys
    GROUP BY ALL
)
SELECT f.config_id, f.fork_step, f.arm, b.feature, b.label AS value, f.label,
       list_transform(f.runs, r -> r.seed) AS seeds,
       list_transform(f.runs, r -> r.run_id) AS run_ids
FROM first_runs AS f
JOIN feature_buckets AS b
  ON b.config_id = f.config_id AND b.fork_step = f.fork_step AND b.feature_order = f.feature_order
 AND b.key IS NOT DISTINCT FROM f.key
ORDER BY f.config_id, f.fork_step, list_position(['off', 'on', 'placebo', 'aa', 'policy'], f.arm) NULLS LAST, f.arm,
         f.feature_order, f.key NULLS LAST, f.label DESC;
