// stdout is the protocol's: one reply per line and nothing else. From the
// moment the SDK is imported, what the agent's code writes to
// process.stdout (console.log included) goes to stderr instead, and the
// SDK writes its replies through the stream's own write. Import the SDK
// before other modules, so that it comes first.
//
// Node's test runner (NODE_TEST_CONTEXT, set in the processes it runs)
// reads its tests' results from their stdout: there the guard waits for
// serve().

const out = process.stdout;
const write = out.write.bind(out);
let guarded = false;

/** Sends what is written to process.stdout to stderr from now on. */
export function guardStdout() {
  if (guarded) return;
  guarded = true;
  out.write = (chunk, encoding, cb) => process.stderr.write(chunk, encoding, cb);
}

/**
 * Writes one reply line (a newline added) to the real stdout; resolves once
 * it is handed to the operating system.
 * @param {string} line
 * @returns {Promise<void>}
 */
export function writeReply(line) {
  return new Promise((done, fail) => write(line + "\n", (e) => (e ? fail(e) : done())));
}

if (!process.env.NODE_TEST_CONTEXT) guardStdout();
