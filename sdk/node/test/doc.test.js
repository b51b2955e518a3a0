// docs/sdk-node.md's smallest agent runs as the page says: it answers
// initialize, start and branch with valid replies (the SDK checks them).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

test("the smallest agent of docs/sdk-node.md plays", () => {
  const doc = readFileSync(new URL("../../../docs/sdk-node.md", import.meta.url), "utf8");
  const block = doc.split("## The smallest agent")[1].split("```js\n")[1].split("```")[0];
  const file = join(mkdtempSync(join(tmpdir(), "sdk-doc-")), "coin.mjs");
  writeFileSync(file, block.replace('"@forklab/agent"', JSON.stringify(new URL("../src/index.js", import.meta.url).href)));
  const line = (id, method, params) => JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n";
  const cp = { flawed: true, heads: 0, steps: 1, seed: "5" };
  const branches = ["off", "on", "aa"].map((arm, i) => ({ arm, intervention: arm === "on" ? "reweigh" : null, replica: 0, noise_key: `00000000000000${i}f` }));
  const input = line(1, "initialize", { protocol_versions: ["forklab-agent/1"], client: { name: "t", version: "0" } }) +
    line(2, "start", { seed: 0, fork_steps: [1, 4], params: {}, model: { temperature: 0, no_tool: 0.5 } }).replace('"seed":0', '"seed":9007199254740993') +
    line(3, "branch", { seed: 5, fork_step: 1, checkpoint: cp, branches }) + line(4, "shutdown", {});
  const env = { ...process.env };
  delete env.NODE_TEST_CONTEXT;
  const r = spawnSync(process.execPath, [file], { input, encoding: "utf8", env, timeout: 20000 });
  assert.equal(r.status, 0, r.stderr);
  const replies = r.stdout.trimEnd().split("\n").map((l) => JSON.parse(l));
  assert.deepEqual(replies.map((x) => x.error ?? "ok"), ["ok", "ok", "ok", "ok"], r.stdout);
  const forks = replies[1].result.forks;
  assert.deepEqual(forks.map((f) => [f.fork_step, f.over, f.cost.steps]), [[1, false, 1], [4, true, 4]]);
  assert.equal(forks[0].checkpoint.seed, "9007199254740993");
  // The re-weigh costs a flip: every branch ends at the fourth step.
  assert.deepEqual(replies[2].result.branches.map((b) => b.cost.steps), [3, 3, 3]);
});
