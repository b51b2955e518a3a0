# mk/show.mk — transcripts and forklab show (issue 24; docs/show.md).
# Included by the top Makefile, whose `make bench` runs both benchmarks.
#
#   bench-transcripts  the counter sweep over BENCH_TRANSCRIPT_SEEDS seeds
#                      (default 1,000,000) and the toolloop sweep over a
#                      tenth of them, each without and with --transcripts in
#                      turn: pairs/s of each, x_with_transcripts (wall) and
#                      x_cpu (CPU time; trust it on a busy machine); the
#                      10% budget a default may cost is x >= 0.9
#   bench-show         forklab show, the whole process, on five pairs of a
#                      BENCH_SHOW_SEEDS-seed sweep (default 10,000,000; or
#                      the finished sweep FORKLAB_BENCH_REPORT_DIR): slowest
#                      and median seconds, CPU seconds (target: 1 s)

SHOW_GO ?= $(if $(GO),$(GO),go)

.PHONY: bench-transcripts bench-show

bench-transcripts:
	$(SHOW_GO) test -run '^$$' -bench 'Transcripts' -benchtime 3x -timeout 60m ./pipeline/analysis/report

bench-show:
	$(SHOW_GO) test -run '^$$' -bench 'ShowAtScale' -benchtime 3x -timeout 60m ./pipeline/analysis/report
