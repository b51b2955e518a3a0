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
--                 of either side failed (status 'error'),
--   and for a world that declares a score (NULL otherwise), over the pairs'
--   score differences d = score_treated − score_control (score_counts):
--   mean_score_diff        the mean paired difference,
--   score_diff_lo, _hi     its 95% interval, the paired t interval
--                          mean ± t(0.975; n − 1)·s/√n (NULL below 2 pairs),
--   wilcoxon_p             the Wilcoxon signed-rank test's two-sided p, as
--                          scipy.stats.wilcoxon(d, zero_method="wilcox",
--                          correction=False, method="approx") computes it:
--                          zero differences dropped, tied |d| at their mean
--                          rank, normal approximation with the tie-corrected
--                          variance (NULL when every d is 0),
--   wilcoxon_n             the nonzero differences it ranks.
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
),
-- Score differences: the mean over the frequency table of d, each sum in
-- the order of d, so that the same pairs give the same bits.
score_mean AS (
    SELECT config_id, fork_step, arm, CAST(sum(n) AS BIGINT) AS score_pairs,
           list_sum(list(n * score_diff ORDER BY score_diff)) / sum(n) AS mean_d
    FROM score_counts
    GROUP BY config_id, fork_step, arm
),
score_spread AS (
    SELECT s.config_id, s.fork_step, s.arm,
           list_sum(list(s.n * (s.score_diff - m.mean_d) * (s.score_diff - m.mean_d) ORDER BY s.score_diff)) AS ss
    FROM score_counts AS s
    JOIN score_mean AS m USING (config_id, fork_step, arm)
    GROUP BY s.config_id, s.fork_step, s.arm
),
-- The nonzero |d|, each with its count (a tie group's size) and how many
-- of them are positive.
score_ranks AS (
    SELECT config_id, fork_step, arm, abs(score_diff) AS a, sum(n) AS c,
           coalesce(sum(n) FILTER (WHERE score_diff > 0), 0) AS pos
    FROM score_counts
    WHERE score_diff <> 0
    GROUP BY config_id, fork_step, arm, abs(score_diff)
),
-- T+: a tie group's mean rank is before + (c + 1)/2; twice it is an
-- integer, so the rank sum is summed exactly.
wilcoxon AS (
    SELECT config_id, fork_step, arm,
           CAST(sum(CAST(pos AS HUGEINT) * (2 * before + c + 1)) AS DOUBLE) / 2 AS t_plus,
           CAST(sum(c) AS BIGINT) AS n,
           CAST(sum(CAST(c AS HUGEINT) * c * c - c) AS DOUBLE) AS ties
    FROM (SELECT *, coalesce(sum(c) OVER (PARTITION BY config_id, fork_step, arm ORDER BY a
                                          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
          FROM score_ranks)
    GROUP BY config_id, fork_step, arm
),
scored AS (
    SELECT m.config_id, m.fork_step, m.arm, m.mean_d,
           CASE WHEN m.score_pairs >= 2 THEN m.mean_d - t975(m.score_pairs - 1) * sqrt(s.ss / (m.score_pairs - 1) / m.score_pairs) END AS lo,
           CASE WHEN m.score_pairs >= 2 THEN m.mean_d + t975(m.score_pairs - 1) * sqrt(s.ss / (m.score_pairs - 1) / m.score_pairs) END AS hi,
           wilcoxon_p(w.t_plus, w.n, w.ties) AS wilcoxon_p,
           coalesce(w.n, 0) AS wilcoxon_n
    FROM score_mean AS m
    JOIN score_spread AS s USING (config_id, fork_step, arm)
    LEFT JOIN wilcoxon AS w USING (config_id, fork_step, arm)
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
       errors,
       sc.mean_d                                               AS mean_score_diff,
       sc.lo                                                   AS score_diff_lo,
       sc.hi                                                   AS score_diff_hi,
       sc.wilcoxon_p,
       sc.wilcoxon_n
FROM counted
LEFT JOIN scored AS sc USING (config_id, fork_step, arm)
ORDER BY config_id, fork_step, list_position(['off', 'on', 'placebo', 'aa', 'policy'], arm) NULLS LAST, arm;
