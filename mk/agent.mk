# mk/agent.mk — external agents over forklab-agent/1 (docs/agent-protocol.md).
# Included by the top Makefile.
#
#   bench-agent   the protocol's overhead, in one run: the seed's reference core
#                 in process (testdata/seed/seed_reference.py) against the same
#                 core as an agent (examples/agents/seed_core.py) swept through
#                 the protocol with --parallel 2 over BENCH_AGENT_SEEDS seeds
#                 (default 100,000): pairs/s of each and the ratio (target at
#                 least 0.5x; x_reference_cpu is the same ratio from CPU time,
#                 which a busy machine skews less); and requests/s through
#                 `forklab agent serve --world counter`
#   agent-check   forklab agent check on every example agent, AGENT_CHECKS
#                 (one line each, below): fails if any check fails, or if
#                 an agent cannot be checked (no node or python3: nothing
#                 is skipped); first npm ci of every package-lock.json under
#                 sdk/ and examples/ whose node_modules is missing or older

AGENT_GO  ?= $(if $(GO),$(GO),go)
AGENT_BIN ?= $(if $(BIN),$(BIN),bin/forklab)

# The example agents forklab agent check runs, one quoted command line
# each (run from the repository's root).
AGENT_CHECKS += 'python3 examples/agents/seed_core.py'
AGENT_CHECKS += 'node examples/agents/toolbot.mjs'

.PHONY: bench-agent agent-check agent-check-npm

bench-agent: build
	FORKLAB_BIN=$(abspath $(AGENT_BIN)) $(AGENT_GO) test -run '^$$' -bench 'AgentProtocol' -benchtime 1x -v -timeout 30m ./pipeline/lab/agentproc | grep -v '^=== '

agent-check: build agent-check-npm
	@failed=""; n=0; \
	for a in $(AGENT_CHECKS); do \
		n=$$((n+1)); prog=$${a%% *}; \
		if ! command -v "$$prog" > /dev/null; then \
			echo "make agent-check: $$prog is not installed: cannot check $$a"; failed="$$failed\n  $$a ($$prog not installed)"; continue; \
		fi; \
		echo "== forklab agent check '$$a'"; \
		$(AGENT_BIN) agent check "$$a" || failed="$$failed\n  $$a"; \
	done; \
	if [ -n "$$failed" ]; then printf 'make agent-check: FAILED:%b\n' "$$failed"; exit 1; fi; \
	echo "make agent-check: all $$n example agents pass"

# The npm packages the Node agents need: npm ci in every directory of sdk/
# and examples/ with a package-lock.json, unless its node_modules is newer.
agent-check-npm:
	@for lock in $$(git ls-files 'sdk/*package-lock.json' 'examples/*package-lock.json'); do \
		dir=$$(dirname $$lock); \
		if [ ! -e $$dir/node_modules/.package-lock.json ] || [ $$lock -nt $$dir/node_modules/.package-lock.json ]; then \
			echo "npm ci --prefix $$dir"; npm ci --prefix $$dir --no-audit --no-fund || exit 1; \
		fi; \
	done
