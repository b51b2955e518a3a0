# mk/scaleout.mk — sweeps spread over processes (issue 13; docs/scale-out.md).
# Included by the top Makefile, which provides GO.
#
#   bench-distributed   a distributed sweep of the counter world with 1, 2
#                       and 4 worker processes on the embedded broker against
#                       the single-process sweep of the same seeds: wall
#                       time, seeds/s, the ratio, CPU seconds of every
#                       process (BENCH_DIST_SEEDS, default 4,000,000; best of
#                       BENCH_DIST_COUNT, default 3; a few minutes)
#   chaos-distributed   the chaos tests' long versions: over 12,000,000
#                       counter seeds on 3 brokers behind proxies, with the
#                       CPU busy: 12 workers SIGKILLed mid-unit, 40 more a
#                       second apart, 2 stopped for good, the coordinator
#                       killed and restarted, the brokers SIGKILLed and
#                       restarted, the network cut for 10s, every unit
#                       allowed one failed attempt; through the Python
#                       example agent over 400,000 seeds, 10 kills, 2 stops;
#                       each result byte-identical to the single-process
#                       sweep, with the same report (about 20 minutes on a
#                       busy machine)
#
# The machine's other users skew wall times: compare the CPU seconds too.

SCALE_GO        ?= $(if $(GO),$(GO),go)
BENCH_DIST_COUNT ?= 3

.PHONY: bench-distributed chaos-distributed

bench-distributed:
	BENCH_DIST_COUNT=$(BENCH_DIST_COUNT) $(SCALE_GO) test -run '^$$' -bench 'Distributed' -benchtime 1x -timeout 60m ./cmd/forklab

chaos-distributed:
	FORKLAB_CHAOS_DISTRIBUTED=1 $(SCALE_GO) test -run 'TestDistributed(Agent)?Chaos' -count=1 -v -timeout 60m ./cmd/forklab
