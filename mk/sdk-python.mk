# mk/sdk-python.mk — the Python SDK (sdk/python: forklab_agent,
# docs/sdk-python.md). Included by the top Makefile.
#
#   sdk-python-schemas  copy the protocol's schemas (schemas/agent-protocol)
#                       into the package, which validates its replies
#                       against them; schemas.TestPythonSDKSchemas fails
#                       until the copies equal the sources
#   sdk-python-test     the SDK's unit tests and an offline pip install in
#                       a fresh venv (pipeline/lab/agentproc.TestPythonSDK)

SDK_PY_GO ?= $(if $(GO),$(GO),go)

.PHONY: sdk-python-schemas sdk-python-test

sdk-python-schemas:
	rm -f sdk/python/forklab_agent/schemas/*.schema.json
	cp schemas/agent-protocol/*.schema.json sdk/python/forklab_agent/schemas/

sdk-python-test:
	$(SDK_PY_GO) test -count=1 -run 'TestPythonSDK' ./schemas ./pipeline/lab/agentproc
