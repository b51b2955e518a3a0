# mk/log.mk — the session log's targets (issue 5). Included by the top
# Makefile, which provides GO and BIN.
#
#   log-test         Go tests of stream/... (a few seconds; SIGKILL crash test included)
#   log-soak         repeated SIGKILL crash/restart cycles (FORKLAB_SOAK=1, ~1 min)
#   log-conformance  the official Durable Streams conformance suite (npm
#                    @durable-streams/server-conformance-tests 0.3.6, vitest)
#                    against `forklab log serve` on the embedded broker (~2 min)
#   log-cluster-test the conformance suite and the durability tests of
#                    stream/client with `forklab log serve --brokers` on a
#                    3-broker cluster (`forklab kafka serve --nodes 3`, its
#                    own process) (~3 min)
#   bench-log        appends/s, p50/p99 and resident memory of 16, 64 and 256
#                    producers (100-byte bodies) and of 16 with 1 KiB and 64 KiB
#                    bodies, and a 1,000,000-event catch-up read, side by side
#                    with the reference Node server in memory (and file-backed
#                    at 16 producers), with ratios (~5 min)
#   bench-log-profile where an append's time goes: the stages timed inside the
#                    service, the log's sync against kfake's, and the broker
#                    alone (~1 min)
#   bench-log-restart restart time at 1, 5 and 10 million records, from a
#                    snapshot and by a full rebuild (~15 min, ~3 GB of disk)
#
# Needs Go, Node 20 with npm, and python3; the replay recipe test also uses
# kcat and jq (apt-get install kcat jq) and npm installs kafkajs in stream/replay.

LOG_GO   ?= $(if $(GO),$(GO),go)
LOG_BIN  ?= $(if $(BIN),$(BIN),bin/forklab)
LOG_NODE := stream/conformance

.PHONY: log-test log-soak log-conformance log-cluster-test bench-log bench-log-profile bench-log-restart log-npm log-bin

log-test:
	$(LOG_GO) test ./stream/...

log-soak:
	FORKLAB_SOAK=1 $(LOG_GO) test -run 'Soak' -count=1 -v ./stream/client/

log-bin:
	$(LOG_GO) build -o $(LOG_BIN) ./cmd/forklab

log-npm: $(LOG_NODE)/node_modules/.package-lock.json

$(LOG_NODE)/node_modules/.package-lock.json: $(LOG_NODE)/package.json $(LOG_NODE)/package-lock.json
	cd $(LOG_NODE) && npm ci --no-audit --no-fund

log-conformance: log-bin log-npm
	$(LOG_NODE)/run.sh $(LOG_BIN)

log-cluster-test: log-bin log-npm
	$(LOG_NODE)/cluster-test.sh $(LOG_BIN) $(LOG_GO)

bench-log: log-bin log-npm
	$(LOG_NODE)/bench.sh $(LOG_BIN) --duration 10s --warmup 2s --catchup-events 1000000

bench-log-profile:
	FORKLAB_PROFILE=1 $(LOG_GO) test -count=1 -run TestAppendProfile -v ./stream/service/ | grep -v '^[=-]\{3\} \|^PASS\|^ok'

bench-log-restart:
	FORKLAB_BENCH_RESTART=1 $(LOG_GO) test -count=1 -run TestRestartTime -v -timeout 90m ./stream/service/ | grep -v '^=== \|^PASS\|^ok'
