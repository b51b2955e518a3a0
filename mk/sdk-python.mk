# mk/sdk-python.mk — the Python SDK (sdk/python: forklab_agent,
# docs/sdk-python.md). Included by the top Makefile.
#
#   (the package's copies of the protocol's schemas, against which it
#   validates its replies, are made by make sdk-schemas, mk/sdk.mk)
#   sdk-python-test     the SDK's unit tests and an offline pip install in
#                       a fresh venv (pipeline/lab/agentproc.TestPythonSDK)

SDK_PY_GO ?= $(if $(GO),$(GO),go)

.PHONY: sdk-python-test

sdk-python-test:
	$(SDK_PY_GO) test -count=1 -run 'TestPythonSDK' ./pipeline/lab/agentproc
