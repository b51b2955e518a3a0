// serve() on a real process's stdin and stdout.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const fixture = (name) => fileURLToPath(new URL(`fixtures/${name}`, import.meta.url));
// The fixtures run as forklab runs an agent: outside the test runner.
const env = { ...process.env, NODE_TEST_CONTEXT: "" };
delete env.NODE_TEST_CONTEXT;
const run = (name, input) => spawnSync(process.execPath, [fixture(name)], { input, encoding: "utf8", timeout: 20000, env });
const lines = (...reqs) => reqs.map((r) => JSON.stringify({ jsonrpc: "2.0", ...r }) + "\n").join("");
const init = { id: 1, method: "initialize", params: { protocol_versions: ["forklab-agent/1"], client: { name: "t", version: "0" } } };

test("stdout carries replies only: what the agent prints goes to stderr", () => {
  const r = run("stray.mjs", lines(init, { id: 2, method: "start", params: { seed: 3, fork_steps: [2], params: {}, model: { temperature: 0, no_tool: 0.5 } } }, { id: 3, method: "shutdown", params: {} }));
  assert.equal(r.status, 0, r.stderr);
  const out = r.stdout.trimEnd().split("\n").map((l) => JSON.parse(l));
  assert.deepEqual(out.map((o) => o.id), [1, 2, 3]);
  assert.deepEqual(out[1].result.forks[0].features, { x: 2 });
  assert.deepEqual(out[2].result, {});
  assert.equal(r.stderr, "loading model... done\nstarting seed 3\nprogress 50%\n");
});

test("the end of stdin ends the process, status 0; CRLF lines are read", () => {
  const r = run("stray.mjs", lines(init).replace("\n", "\r\n"));
  assert.equal(r.status, 0);
  assert.equal(JSON.parse(r.stdout).id, 1);
});

test("a malformed declaration: exit 2 before reading anything, the field named on stderr", () => {
  const r = spawnSync(process.execPath, [fixture("baddecl.mjs")], { encoding: "utf8", timeout: 20000, env, stdio: ["pipe", "pipe", "pipe"] });
  assert.equal(r.status, 2);
  assert.equal(r.stdout, "");
  assert.equal(r.stderr, 'baddecl.mjs: the agent\'s definition is malformed: declaration.features[0].type must be one of "bool", "int", "float", "enum", got "integer"\n');
});
