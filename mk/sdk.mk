# mk/sdk.mk — the SDKs agents import (sdk/; docs/sdk-node.md). Included by
# the top Makefile, which provides GO.
#
#   sdk-schemas    copy schemas/agent-protocol/*.schema.json into each SDK's
#                  bundled copy (every directory named agent-protocol under
#                  sdk/, and the Python package's forklab_agent/schemas);
#                  schemas' TestSDKSchemaCopies fails until they agree
#   sdk-node-test  the Node SDK's tests (npm ci in sdk/node for TypeScript,
#                  then node --test) and its LangGraph adapter's (npm ci in
#                  examples/agents/langgraph)

SDK_GO ?= $(if $(GO),$(GO),go)

.PHONY: sdk-schemas sdk-node-test

sdk-schemas:
	@for d in $$(find sdk -type d -name agent-protocol -not -path '*/node_modules/*') sdk/python/forklab_agent/schemas; do \
		rm -f $$d/*.schema.json && cp schemas/agent-protocol/*.schema.json $$d/ && echo "copied schemas/agent-protocol into $$d"; \
	done

sdk-node-test:
	$(SDK_GO) test -count=1 -v -run 'TestNodeSDK|TestLangGraphAdapter' ./sdk/
