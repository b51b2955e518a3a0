# forklab — see README.md. Every target works on a fresh machine with Go at
# /usr/local/go; `make test` also installs the npm conformance suite.
export PATH := /usr/local/go/bin:$(PATH)

# duckdb-go's Arrow interface (forklab sql --format arrow) needs this tag.
ifeq ($(findstring -tags,$(GOFLAGS)),)
export GOFLAGS := $(strip $(GOFLAGS) -tags=duckdb_arrow)
endif

GO      ?= go
BIN     := bin/forklab
OUT     ?= out
SEEDS   ?= 0:300
FORK_AT ?= 3

.PHONY: all build sweep sweep-noisy sweep-toolloop test test-go test-skipped vet fmt-check bench clean

all: build

# DuckDB links through cgo, so the build needs a C compiler (gcc): without
# one it stops here and says so. The first build (an empty Go build cache)
# compiles DuckDB's cgo bindings and forklab's other dependencies, seven
# minutes of CPU (docs/speed.md), and says so first; a later one that changed anything
# relinks the binary with DuckDB's C++ library, up to a minute.
build:
	@cc="$$($(GO) env CC 2>/dev/null)"; if [ -n "$$cc" ] && ! command -v "$${cc%% *}" > /dev/null; then \
		echo "make: forklab links DuckDB through cgo and needs a C compiler, but '$$cc' is not on PATH: install gcc (Debian: apt-get install gcc) or set CC" >&2; exit 1; fi
	@if [ "$$($(GO) list -f '{{.Stale}}' github.com/duckdb/duckdb-go/v2 2>/dev/null)" = true ]; then \
		echo "make: first build: compiling DuckDB's cgo bindings and forklab's dependencies, 3 to 4 minutes on a quiet 2-core machine (kept in Go's build cache)"; fi
	@echo "$(GO) build -o $(BIN) ./cmd/forklab   # links DuckDB's C++ library: up to a minute when anything changed"
	@$(GO) build -o $(BIN) ./cmd/forklab

# The main job: the seed's experiment, from the sweep to Parquet to the
# DuckDB report; then the guard policy searched on part of the seeds, and the
# rerun with recovery only where it fires, beside always-on. It prints one
# screen (issue 26): what each step wrote, then the rerun's brief report —
# headlines and the Result in words; the tables are in forklab report
# $(OUT) and the HTML pages.
sweep: build
	@$(BIN) sweep --seeds $(SEEDS) --fork-at $(FORK_AT) --out $(OUT) --overwrite > /dev/null
	@$(BIN) report $(OUT) --html $(OUT)/report.html --overwrite
	@$(BIN) policy $(OUT) --max-harm 0 --out $(OUT)/policy.json --overwrite > /dev/null
	@$(BIN) sweep --seeds $(SEEDS) --fork-at $(FORK_AT) --arms off,on,policy --policy $(OUT)/policy.json \
		--out $(OUT)/rerun --overwrite > /dev/null
	@$(BIN) report $(OUT)/rerun --brief --html $(OUT)/rerun/report.html --overwrite

# Imperfect signals, a noisy agent, every arm, five replicas (testdata/specs/noisy.yaml).
sweep-noisy: build
	$(BIN) sweep --spec testdata/specs/noisy.yaml --out $(OUT)-noisy --overwrite
	$(BIN) report $(OUT)-noisy --html $(OUT)-noisy/report.html --overwrite

# The tool-calling loop (testdata/specs/toolloop.yaml): 20,000 seeds, every
# arm, a noisy model with five replicas; its report's Result is in docs/worlds.md.
sweep-toolloop: build
	$(BIN) sweep --spec testdata/specs/toolloop.yaml --out $(OUT)-toolloop --overwrite
	$(BIN) report $(OUT)-toolloop --html $(OUT)-toolloop/report.html --overwrite

test: vet fmt-check test-go log-conformance test-skipped

# The checks the tests skip for want of a tool this Makefile does not
# install, said at the end of make test where they cannot be missed
# (.ci/run installs the tools and makes the checks required).
test-skipped:
	@{ [ -n "$$FORKLAB_CHROMIUM" ] || command -v chromium || command -v chromium-browser || command -v google-chrome; } > /dev/null || \
		echo "make test: SKIPPED the browser check of the HTML report: no chromium (make chromium installs Debian's)"
	@{ command -v kcat && command -v jq; } > /dev/null || \
		echo "make test: SKIPPED the kcat replay recipe's tests and the README's kcat block: no kcat or jq (apt-get install kcat jq)"
	@command -v python3 > /dev/null || \
		echo "make test: SKIPPED the Python example agent's tests and the README's agent block: no python3"

vet:
	$(GO) vet ./...

fmt-check:
	@files=$$(gofmt -l cmd internal pipeline schemas queries stream 2>/dev/null); \
	if [ -n "$$files" ]; then echo "gofmt needed:"; echo "$$files"; exit 1; fi

test-go:
	# cmd/forklab (README, bounds, exit-status and chaos tests) takes about 7 min on a
	# quiet 2-core machine and 20 min under a load of 12: the timeout leaves room.
	$(GO) test -count=1 -timeout 40m ./...

# The whole sweep (simulation, Parquet, DuckDB summary) at 1,000,000 seeds
# against the seed's Python reference core on the same seeds, the toolloop
# world's sweep at 100,000 seeds beside it (pairs/s, x_counter), the peak
# memory of a 10,000,000-seed sweep, and the whole report over a
# 10,000,000-seed sweep against the per-feature SQL's 12.8 s and 1.2 GB;
# the sweep's pairs/s without and with --transcripts (x_with_transcripts),
# forklab show's seconds on a 10,000,000-seed sweep (target 1 s), and a
# file of 10,000,000 recorded checkpoints swept beside the seeds' sweep
# (mk/recorded.mk). BENCH_SEEDS, BENCH_TOOLLOOP_SEEDS, BENCH_MEM_SEEDS,
# BENCH_REPORT_SEEDS, BENCH_TRANSCRIPT_SEEDS, BENCH_SHOW_SEEDS and
# BENCH_RECORDED_RUNS change the sizes.
bench:
	$(GO) test -run '^$$' -bench 'SweepEndToEnd|SweepToolloop|SweepPeakMemory|ReportAtScale|Transcripts|ShowAtScale' -benchtime 3x -timeout 60m ./pipeline/analysis/report
	$(MAKE) --no-print-directory bench-sql
	$(MAKE) --no-print-directory bench-recorded

clean:
	rm -rf bin $(OUT)

-include mk/*.mk
