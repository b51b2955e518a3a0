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
#                 `forklab agent serve --world counter`; then the LangGraph
#                 example swept with --parallel the CPU count against the same
#                 experiment done with LangGraph's own time travel in one Node
#                 process (examples/agents/langgraph/timetravel.mjs), same
#                 seeds (BENCH_LANGGRAPH_SEEDS, default 600) and arms: pairs/s
#                 of each and the ratio (target at least 0.8x), the label
#                 counts of both checked equal
#   agent-check   forklab agent check on every example agent, AGENT_CHECKS
#                 (one line each, below): fails if any check fails, or if
#                 an agent cannot be checked (no node or python3: nothing
#                 is skipped); first npm ci of every package-lock.json under
#                 sdk/ and examples/ whose node_modules is missing or older
#   sweep-langgraph  the LangGraph example (examples/agents/langgraph: npm ci
#                 there) swept with arms off, on, placebo and aa into
#                 $(OUT)-langgraph/ (LANGGRAPH_SEEDS, default 0:1000, fork
#                 step 2), its report, its guard policy, and the rerun with
#                 the policy arm; fails if the A/A arm flips a pair or the
#                 policy is never or always

AGENT_GO  ?= $(if $(GO),$(GO),go)
AGENT_BIN ?= $(if $(BIN),$(BIN),bin/forklab)

# The example agents forklab agent check runs, one quoted command line
# each (run from the repository's root).
AGENT_CHECKS += 'python3 examples/agents/seed_core.py'
AGENT_CHECKS += 'node examples/agents/toolbot.mjs'
AGENT_CHECKS += 'node examples/agents/langgraph/agent.mjs'

.PHONY: bench-agent agent-check agent-check-npm sweep-langgraph langgraph-npm

bench-agent: build langgraph-npm
	FORKLAB_BIN=$(abspath $(AGENT_BIN)) $(AGENT_GO) test -run '^$$' -bench 'AgentProtocol|AgentLangGraph' -benchtime 1x -v -timeout 30m ./pipeline/lab/agentproc | grep -v '^=== '

agent-check: build langgraph-npm agent-check-npm
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

# The LangGraph example's packages: LangGraph.js as its package-lock.json
# pins it, and a copy of sdk/node (its .npmrc sets install-links), fresh
# each time.
LANGGRAPH_DIR   := examples/agents/langgraph
LANGGRAPH_SEEDS ?= 0:1000
AGENT_PARALLEL  ?= $(shell nproc 2>/dev/null || echo 2)

langgraph-npm:
	cd $(LANGGRAPH_DIR) && npm ci --no-audit --no-fund

sweep-langgraph: build langgraph-npm
	$(AGENT_BIN) sweep --agent 'node $(LANGGRAPH_DIR)/agent.mjs' --parallel $(AGENT_PARALLEL) --seeds $(LANGGRAPH_SEEDS) --fork-at 2 \
		--arms off,on,placebo,aa --out $(OUT)-langgraph --overwrite
	@flips=$$($(AGENT_BIN) sql $(OUT)-langgraph "SELECT count(*) FROM pairs WHERE arm = 'aa' AND label <> 'unchanged'" --format csv | tail -1); \
		test "$$flips" = 0 || { echo "sweep-langgraph: the A/A arm flipped $$flips pairs: the agent's branches are not a function of their checkpoint"; exit 1; }
	$(AGENT_BIN) report $(OUT)-langgraph --html $(OUT)-langgraph/report.html --overwrite
	$(AGENT_BIN) policy $(OUT)-langgraph --max-harm 0 --out $(OUT)-langgraph/policy.json --overwrite
	@grep -q '"feature"' $(OUT)-langgraph/policy.json || { echo "sweep-langgraph: the guard policy is never or always"; exit 1; }
	$(AGENT_BIN) sweep --agent 'node $(LANGGRAPH_DIR)/agent.mjs' --parallel $(AGENT_PARALLEL) --seeds $(LANGGRAPH_SEEDS) --fork-at 2 \
		--arms off,on,policy --policy $(OUT)-langgraph/policy.json --out $(OUT)-langgraph/rerun --overwrite
	$(AGENT_BIN) report $(OUT)-langgraph/rerun --brief --html $(OUT)-langgraph/rerun/report.html --overwrite
