-- What does each arm do in each configuration of a grid, by the
-- configuration's parameter values?
--
-- Inputs: summary (queries/summary.sql), config_params (the views of
--   queries.Views: one row per configuration, its declared scalar
--   parameters as typed columns, list parameters as their text).
-- Output: one row per configuration, fork step and treatment arm, as in
--   summary: config_id, the configuration's parameters by name (for the
--   counter world: target, base_budget, slack, freeze_at, p_stall,
--   p_obs_noise, p_refresh_fail), then fork_step, arm and the rest of
--   summary's columns. So a grid's question reads
--   SELECT p_stall, arm, net, net_lo, net_hi FROM summary_by_config
--   without joining config_params by hand.
WITH by_config AS (
    SELECT p.*, s.* EXCLUDE (config_id)
    FROM summary AS s
    JOIN config_params AS p USING (config_id)
)
SELECT * FROM by_config
ORDER BY config_id, fork_step, list_position(['off', 'on', 'placebo', 'aa', 'policy'], arm) NULLS LAST, arm;
