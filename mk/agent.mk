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
#   agent-check   forklab agent check on both example agents
#   sweep-langgraph  the LangGraph example (examples/agents/langgraph: npm ci
#                 there) swept with arms off, on, placebo and aa into
#                 $(OUT)-langgraph/ (LANGGRAPH_SEEDS, default 0:1000, fork
#                 step 2), its report, its guard policy, and the rerun with
#                 the policy arm; fails if the A/A arm flips a pair or the
#                 policy is never or always

AGENT_GO  ?= $(if $(GO),$(GO),go)
AGENT_BIN ?= $(if $(BIN),$(BIN),bin/forklab)

.PHONY: bench-agent agent-check sweep-langgraph langgraph-npm

bench-agent: build langgraph-npm
	FORKLAB_BIN=$(abspath $(AGENT_BIN)) $(AGENT_GO) test -run '^$$' -bench 'AgentProtocol|AgentLangGraph' -benchtime 1x -v -timeout 30m ./pipeline/lab/agentproc | grep -v '^=== '

agent-check: build
	$(AGENT_BIN) agent check 'python3 examples/agents/seed_core.py'
	$(AGENT_BIN) agent check 'node examples/agents/toolbot.mjs'

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
