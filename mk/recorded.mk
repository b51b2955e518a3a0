# mk/recorded.mk — recorded populations (forklab sweep --runs) at scale.
# Included by the top Makefile, whose `make bench` runs it.
#
#   bench-recorded  BENCH_RECORDED_RUNS recorded checkpoints (default
#                   10,000,000: the counter's seeds at fork step 3, one
#                   record per line, about 5.6 GB) swept with --runs, and
#                   the seed sweep of the same seeds beside it: pairs/s and
#                   peak memory of each, their ratios, the file's size
#                   (pipeline/analysis/report, BenchmarkRecordedPeakMemory)

.PHONY: bench-recorded

bench-recorded:
	$(if $(GO),$(GO),go) test -run '^$$' -bench 'RecordedPeakMemory' -benchtime 1x -timeout 240m ./pipeline/analysis/report
