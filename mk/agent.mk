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
#   agent-check   forklab agent check on both example agents

AGENT_GO  ?= $(if $(GO),$(GO),go)
AGENT_BIN ?= $(if $(BIN),$(BIN),bin/forklab)

.PHONY: bench-agent agent-check

bench-agent: build
	FORKLAB_BIN=$(abspath $(AGENT_BIN)) $(AGENT_GO) test -run '^$$' -bench 'AgentProtocol' -benchtime 1x -v -timeout 30m ./pipeline/lab/agentproc | grep -v '^=== '

agent-check: build
	$(AGENT_BIN) agent check 'python3 examples/agents/seed_core.py'
	$(AGENT_BIN) agent check 'node examples/agents/toolbot.mjs'
