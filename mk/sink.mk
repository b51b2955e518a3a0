# mk/sink.mk — forklab log sink (issue 15). Included by the top Makefile,
# which provides GO.
#
#   bench-sink   the session log under 16 producers appending session events
#                as fast as it takes them (embedded broker, fsync per batch),
#                with `forklab log sink --follow` beside it in a process of
#                its own: the log's appends/s (the baseline), the events/s the
#                sink wrote over the same time and the ratio (target ≥ 1, to
#                within what the rotation interval holds back), how soon it
#                caught up, then the sink's own speed copying the whole log
#                again, and its peak memory for two rotation sizes
#                (SINK_BENCH_SECONDS, default 10; ~1 min); and the sink's own
#                work per event without Kafka (fold, row, Parquet, commit)
#   sink-soak    the random-kill test with 400 SIGKILLs instead of 20
#                (FORKLAB_SINK_KILLS; a few minutes)
#
# The machine's other users skew wall times: take the best of several runs.

SINK_GO ?= $(if $(GO),$(GO),go)

.PHONY: bench-sink sink-soak

bench-sink:
	$(SINK_GO) test -run '^$$' -bench 'SinkKeepsUp' -benchtime 1x -timeout 20m ./pipeline/sink
	$(SINK_GO) test -run '^$$' -bench 'ApplyAndRotate' -benchtime 200000x -timeout 20m ./pipeline/sink

sink-soak:
	FORKLAB_SINK_KILLS=400 $(SINK_GO) test -run 'ExactlyOnceUnderKills' -count=1 -v -timeout 60m ./pipeline/sink
