# forklab — see README.md. Every target works on a fresh machine with Go at
# /usr/local/go; `make test` also installs the npm conformance suite.
export PATH := /usr/local/go/bin:$(PATH)

GO      ?= go
BIN     := bin/forklab
OUT     ?= out
SEEDS   ?= 0:300
FORK_AT ?= 3

.PHONY: all build sweep test test-go vet fmt-check bench clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/forklab

# The main job: the seed's experiment, from the sweep to Parquet to the
# DuckDB report.
sweep: build
	$(BIN) sweep --seeds $(SEEDS) --fork-at $(FORK_AT) --out $(OUT) --overwrite
	$(BIN) report $(OUT)

test: vet fmt-check test-go

vet:
	$(GO) vet ./...

fmt-check:
	@files=$$(gofmt -l cmd pipeline schemas queries stream 2>/dev/null); \
	if [ -n "$$files" ]; then echo "gofmt needed:"; echo "$$files"; exit 1; fi

test-go:
	$(GO) test -count=1 -timeout 20m ./...

# The whole sweep (simulation, Parquet, DuckDB summary) at 1,000,000 seeds
# against the seed's Python reference core on the same seeds, and the peak
# memory of a 10,000,000-seed sweep. BENCH_SEEDS and BENCH_MEM_SEEDS change
# the sizes.
bench:
	$(GO) test -run '^$$' -bench 'SweepEndToEnd|SweepPeakMemory' -benchtime 3x -timeout 60m ./pipeline/report

clean:
	rm -rf bin $(OUT)

-include mk/*.mk
