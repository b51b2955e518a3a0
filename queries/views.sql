-- Views over one results directory.
--
-- Question: none; this file names the tables every other query reads.
-- Inputs:   the Parquet folders of a results directory, by paths relative to
--           it (run the duckdb CLI from inside the directory, or set
--           file_search_path to it, as forklab does). The folders are
--           Hive-partitioned by config_id (and fork_step); union_by_name lets
--           files of different schema versions be read together.
-- Output:   views configs, tasks, checkpoints, branches, pairs (columns: see
--           schemas/README.md). tasks and pairs carry their configuration's
--           parameters as columns, so a parameter grid slices without a join.
CREATE OR REPLACE VIEW configs AS
    SELECT * FROM read_parquet('configs/*.parquet');

CREATE OR REPLACE VIEW tasks AS
    SELECT t.config_id, t.* EXCLUDE (config_id), c.* EXCLUDE (config_id)
    FROM read_parquet('tasks/*/*.parquet', hive_partitioning = true, union_by_name = true,
                      hive_types = {'config_id': INTEGER}) AS t
    JOIN configs AS c USING (config_id);

CREATE OR REPLACE VIEW checkpoints AS
    SELECT config_id, fork_step, * EXCLUDE (config_id, fork_step)
    FROM read_parquet('checkpoints/*/*/*.parquet', hive_partitioning = true, union_by_name = true,
                      hive_types = {'config_id': INTEGER, 'fork_step': INTEGER});

CREATE OR REPLACE VIEW branches AS
    SELECT config_id, fork_step, * EXCLUDE (config_id, fork_step)
    FROM read_parquet('branches/*/*/*.parquet', hive_partitioning = true, union_by_name = true,
                      hive_types = {'config_id': INTEGER, 'fork_step': INTEGER});

CREATE OR REPLACE VIEW pairs AS
    SELECT p.config_id, p.fork_step, p.* EXCLUDE (config_id, fork_step), c.* EXCLUDE (config_id)
    FROM read_parquet('pairs/*/*/*.parquet', hive_partitioning = true, union_by_name = true,
                      hive_types = {'config_id': INTEGER, 'fork_step': INTEGER}) AS p
    JOIN configs AS c USING (config_id);
