// The official Durable Streams conformance suite, pointed at the server in
// CONFORMANCE_TEST_URL (started by mk/log.mk's conformance target).
import { runConformanceTests } from "@durable-streams/server-conformance-tests"

const baseUrl = process.env.CONFORMANCE_TEST_URL
if (!baseUrl) throw new Error("set CONFORMANCE_TEST_URL, e.g. http://127.0.0.1:4437")
runConformanceTests({
  baseUrl,
  longPollTimeoutMs: Number(process.env.CONFORMANCE_LONG_POLL_MS ?? 2000),
})
