# mk/bench.mk — the sweep's speed and memory, piece by piece. Included by the
# top Makefile, whose `make bench` runs the end-to-end and peak-memory
# benchmarks together (pipeline/analysis/report/bench_test.go).
#
#   bench-sweep     the whole sweep (simulation, Parquet, DuckDB summary) over
#                   BENCH_SEEDS seeds (default 1,000,000), beside the seed's
#                   Python reference core on the same seeds: pairs/s, the
#                   ratio (x_reference, target 30), sweep and summary seconds,
#                   CPU seconds per run (~1 min, most of it the reference);
#                   then the same for the toolloop world over
#                   BENCH_TOOLLOOP_SEEDS seeds (default 100,000; or the spec
#                   file BENCH_TOOLLOOP_SPEC), its pairs/s beside the
#                   counter's (x_counter)
#   bench-mem       peak resident memory of `forklab sweep` over
#                   BENCH_MEM_SEEDS seeds (default 10,000,000; target < 1 GiB)
#   bench-stages    CPU ns per seed of each stage of one unit of the counter
#                   sweep (the runner alone, the runner and the rows, each
#                   table's Parquet, the whole unit into files), then the
#                   counter's labs; best of BENCH_COUNT runs counts
#   bench-cpu       user and system seconds of `forklab sweep` over 1,000,000
#                   seeds with one worker: the figure to compare on a busy
#                   machine, where wall time says little
#   bench-report    the whole report (forklab report) over a sweep of
#                   BENCH_REPORT_SEEDS seeds (default 10,000,000; or the
#                   finished sweep FORKLAB_BENCH_REPORT_DIR): best wall
#                   seconds, CPU seconds, peak memory, and the ratios to the
#                   per-feature SQL's 12.8 s and 1.2 GB (target 3 s, 512 MiB)
#   bench-profile   CPU profile of the end-to-end benchmark into
#                   $(BENCH_OUT)/cpu.prof, and its top functions
#
# The machine's other users skew wall times: compare CPU figures, and take
# the best of several runs.

BENCH_GO    ?= $(if $(GO),$(GO),go)
BENCH_BIN   ?= $(if $(BIN),$(BIN),bin/forklab)
BENCH_OUT   ?= /tmp/forklab-bench
BENCH_COUNT ?= 3

.PHONY: bench-sweep bench-mem bench-stages bench-cpu bench-profile bench-report

bench-sweep:
	$(BENCH_GO) test -run '^$$' -bench 'SweepEndToEnd|SweepToolloop' -benchtime 3x -count $(BENCH_COUNT) -timeout 60m ./pipeline/analysis/report

bench-mem:
	$(BENCH_GO) test -run '^$$' -bench 'SweepPeakMemory' -benchtime 1x -timeout 60m ./pipeline/analysis/report

bench-report:
	$(BENCH_GO) test -run '^$$' -bench 'ReportAtScale' -benchtime $(BENCH_COUNT)x -timeout 60m ./pipeline/analysis/report

bench-stages:
	$(BENCH_GO) test -run '^$$' -bench 'Stages' -benchtime 5x -count $(BENCH_COUNT) ./pipeline/lab/sweep
	$(BENCH_GO) test -run '^$$' -bench 'Lab' -count $(BENCH_COUNT) ./pipeline/worlds/counter

bench-cpu:
	$(BENCH_GO) build -o $(BENCH_BIN) ./cmd/forklab
	@mkdir -p $(BENCH_OUT)
	@for i in $$(seq $(BENCH_COUNT)); do \
		/usr/bin/time -f "%U s user  %S s system  %e s wall  %M KiB peak" \
			$(BENCH_BIN) sweep --seeds 0:1000000 --out $(BENCH_OUT)/sweep --overwrite -q --workers 1; \
	done

bench-profile:
	@mkdir -p $(BENCH_OUT)
	$(BENCH_GO) test -c -o $(BENCH_OUT)/report.test ./pipeline/analysis/report
	cd pipeline/analysis/report && $(BENCH_OUT)/report.test -test.run '^$$' -test.bench 'SweepEndToEnd' \
		-test.benchtime 3x -test.cpuprofile $(BENCH_OUT)/cpu.prof
	$(BENCH_GO) tool pprof -top -nodecount 40 $(BENCH_OUT)/report.test $(BENCH_OUT)/cpu.prof
