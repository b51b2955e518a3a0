# mk/sql.mk — forklab sql's speed beside a plain DuckDB process, and the
# cost of the checksums every command checks when it opens a results
# directory. `make bench` runs it too.
#
#   bench-sql   forklab sql DIR "SELECT 1" (and a GROUP BY over pairs) in
#               turn with cmd/forklab/testdata/duckq, a plain DuckDB process that
#               attaches DIR/results.duckdb, over BENCH_SQL_SEEDS seeds
#               (default 100,000): median wall ms of each, x-wall and x-cpu
#               (target: within 2×); then the CRC-32C check of a sweep of
#               BENCH_VERIFY_SEEDS seeds (default 1,000,000): ms per check
#               and MB/s

SQL_BENCH_GO       ?= $(if $(GO),$(GO),go)
SQL_BENCH_OUT      ?= /tmp/forklab-bench-sql
BENCH_SQL_SEEDS    ?= 100000
BENCH_VERIFY_SEEDS ?= 1000000

.PHONY: bench-sql

bench-sql:
	FORKLAB_BENCH_SQL_SEEDS=$(BENCH_SQL_SEEDS) $(SQL_BENCH_GO) test -run '^$$' -bench 'SQLVsPlainDuckDB' -benchtime 15x -timeout 30m ./cmd/forklab
	$(SQL_BENCH_GO) run ./cmd/forklab sweep -q --seeds 0:$(BENCH_VERIFY_SEEDS) --out $(SQL_BENCH_OUT)/verify --overwrite
	FORKLAB_BENCH_VERIFY_DIR=$(SQL_BENCH_OUT)/verify $(SQL_BENCH_GO) test -run '^$$' -bench 'VerifyContent' -benchtime 10x ./pipeline/lab/sweep
