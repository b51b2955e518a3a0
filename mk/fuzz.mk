# mk/fuzz.mk — Go native fuzz tests at the places where outside bytes enter
# (issue 25 G). Included by the top Makefile.
#
#   fuzz        each target of FUZZ_TARGETS for FUZZ_TIME (default 60s)
#   fuzz-short  each for FUZZ_SHORT (default 5s): the pass CI runs
#
# A target is PACKAGE:FuzzName. Add yours to FUZZ_TARGETS (one += line per
# target keeps merges easy); commit its seed corpus under
# testdata/fuzz/FuzzName/ (Go's corpus format), and make a crash the fuzzer
# finds a seed there, so that plain go test runs it from then on. Go reads
# PACKAGE/testdata/fuzz/FuzzName/ itself, which all targets use but
# FuzzSQLSandbox (it reads the top-level testdata/fuzz/FuzzSQLSandbox/);
# seeds also come from each test's f.Add calls and the repository's
# testdata files it names. Go can
# fuzz one target of one package at a time, so the targets run in turn.

FUZZ_GO    ?= $(if $(GO),$(GO),go)
FUZZ_TIME  ?= 60s
FUZZ_SHORT ?= 5s

FUZZ_TARGETS += ./pipeline/analysis/export:FuzzSQLSandbox
FUZZ_TARGETS += ./pipeline/worlds/pyrand:FuzzLane
FUZZ_TARGETS += ./stream/kafkalog:FuzzParseOffset
FUZZ_TARGETS += ./stream/kafkalog:FuzzDecodeRecord
FUZZ_TARGETS += ./stream/kafkalog:FuzzDecodeSnapshot
FUZZ_TARGETS += ./stream/server:FuzzProducerHeaders
FUZZ_TARGETS += ./stream/server:FuzzRequest
FUZZ_TARGETS += ./pipeline/lab:FuzzCheckpointCounter
FUZZ_TARGETS += ./pipeline/lab:FuzzCheckpointToolloop
FUZZ_TARGETS += ./pipeline/lab/agentproc:FuzzAgentReply
FUZZ_TARGETS += ./pipeline/lab/agentproc:FuzzServe
FUZZ_TARGETS += ./pipeline/analysis/policy:FuzzPolicy
FUZZ_TARGETS += ./pipeline/lab/sweep:FuzzSpecFile
FUZZ_TARGETS += ./pipeline/lab/sweep:FuzzManifest
FUZZ_TARGETS += ./pipeline/lab/recorded:FuzzRunsFile

.PHONY: fuzz fuzz-short

# A target fails on a finding: a reproducer written to testdata/fuzz/, a
# panic, a t.Error. Go 1.26's coordinator also fails a target with a bare
# "context deadline exceeded" when -fuzztime ends while a worker is
# mid-input on a busy machine (golang/go#75804, fixed in Go 1.27), having
# found nothing: such a run counts as passed once the target's corpus,
# replayed as a plain test, passes too.
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$name ($$pkg) for $(FUZZ_TIME)"; \
		log=$$(mktemp); \
		if $(FUZZ_GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZ_TIME) $$pkg > $$log 2>&1; then \
			tail -n 2 $$log; rm -f $$log; continue; \
		fi; \
		cat $$log; \
		if grep -q 'context deadline exceeded' $$log && ! grep -q -e 'Failing input written' -e 'panic:' -e '_test.go:[0-9]' $$log; then \
			rm -f $$log; \
			echo "fuzz $$name: Go's fuzzing deadline race (golang/go#75804), nothing found; replaying its corpus"; \
			$(FUZZ_GO) test -count=1 -run "^$$name\$$" $$pkg; continue; \
		fi; \
		rm -f $$log; exit 1; \
	done

fuzz-short:
	@$(MAKE) --no-print-directory fuzz FUZZ_TIME=$(FUZZ_SHORT)
