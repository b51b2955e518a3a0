-- What happened inside each pair's branches? A sweep played on the session
-- log (forklab sweep --from-log), joined with the events of its sessions.
--
-- Inputs: pairs (queries.Views) and events: the session events exported into the
--   results directory with forklab log export --prefix PREFIX --out DIR
--   (results.duckdb exposes them as the view events; from the duckdb CLI,
--   CREATE VIEW events AS SELECT * FROM read_parquet('events/*.parquet')).
--   Branch streams are named PREFIX/cCONFIG/sSEED/fSTEP/ARM/rREPLICA.
--   Any world: the events' observations are the world's own JSON (obs).
-- Output: one row per pair and side (the control arm off and the treatment
--   arm) whose branch events were exported: config_id, fork_step, seed, arm
--   (the pair's treatment arm), side ('control' or 'treatment'), label,
--   branch_stream, turns (model turns after the fork), no_tool_turns (turns
--   without a tool call), recoveries, final_steps (the run's steps at its
--   end), final_obs (what the agent saw at the end, JSON: read a field with
--   final_obs::JSON ->> 'name'), branch_success.
WITH branch_events AS (
    SELECT stream AS branch_stream,
           CAST(regexp_extract(stream, '/c([0-9]+)/s[0-9]+/f[0-9]+/[a-z]+/r[0-9]+$', 1) AS INTEGER) AS config_id,
           session_seed AS seed, branch_fork_step AS fork_step, branch_arm, branch_replica,
           "index", type, no_tool, steps, obs, success,
           min("index") FILTER (WHERE type = 'fork') OVER (PARTITION BY stream) AS fork_index
    FROM events
    WHERE domain AND branch_arm IS NOT NULL
),
after_fork AS (
    -- A branch stream inherits its parent's events before the fork; only
    -- the events after its fork event are the branch's own.
    SELECT * FROM branch_events WHERE "index" > fork_index
),
branches_summed AS (
    SELECT branch_stream, config_id, seed, fork_step, branch_arm, branch_replica,
           count(*) FILTER (WHERE type = 'model_turn')              AS turns,
           count(*) FILTER (WHERE type = 'model_turn' AND no_tool)  AS no_tool_turns,
           count(*) FILTER (WHERE type = 'recovery')                AS recoveries,
           max(steps) FILTER (WHERE type = 'outcome')               AS final_steps,
           max(obs) FILTER (WHERE type = 'outcome')                 AS final_obs,
           bool_or(success) FILTER (WHERE type = 'outcome')         AS branch_success
    FROM after_fork
    GROUP BY ALL
),
sides AS (
    SELECT p.config_id, p.fork_step, p.seed, p.arm, 'treatment' AS side, p.arm AS branch_arm, p.label
    FROM pairs AS p
    UNION ALL
    SELECT p.config_id, p.fork_step, p.seed, p.arm, 'control', 'off', p.label
    FROM pairs AS p
)
SELECT s.config_id, s.fork_step, s.seed, s.arm, s.side, s.label,
       b.branch_stream, b.turns, b.no_tool_turns, b.recoveries, b.final_steps, b.final_obs, b.branch_success
FROM sides AS s
JOIN branches_summed AS b
  ON b.config_id = s.config_id AND b.fork_step = s.fork_step AND b.seed = s.seed
 AND b.branch_arm = s.branch_arm AND b.branch_replica = 0
ORDER BY s.config_id, s.fork_step, s.seed, s.arm, s.side;
