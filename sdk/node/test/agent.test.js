// The protocol the SDK speaks for an agent: handshake, dispatch, batches,
// the codes of errors, and the check of params and replies with the method
// and field named.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createAgent, InvalidParams, BadCheckpoint, RunFailed, DeclarationError, codes } from "../src/index.js";

const declaration = {
  name: "coin", version: "2",
  params: [{ name: "p", type: "float", default: 0.5, min: 0, max: 1 }],
  features: [{ name: "heads", type: "int" }],
  hidden: [{ name: "flawed", type: "bool" }],
  fault_flag: "flawed",
  interventions: [{ arm: "on", action: "reweigh" }],
  cost: { fields: ["steps"] },
};
const fork = (k) => ({ fork_step: k, over: false, checkpoint: { k }, features: { heads: 1 }, hidden: { flawed: false }, cost: { steps: k } });
const seen = [];
const def = (over = {}) => ({
  declaration,
  agent: { name: "coin.mjs", version: "2" },
  start: (p) => (seen.push(p), { task: {}, forks: p.fork_steps.map(fork) }),
  branch: (p) => (seen.push(p), { branches: p.branches.map(() => ({ success: true, cost: { steps: 1 } })) }),
  ...over,
});
const req = (id, method, params) => JSON.stringify({ jsonrpc: "2.0", id, method, params });
const startParams = (o = {}) => ({ seed: 5, fork_steps: [1, 3], params: {}, model: { temperature: 0, no_tool: 0.5 }, ...o });
const branchParams = (o = {}) => ({ seed: 5, fork_step: 1, checkpoint: { k: 1 }, branches: [{ arm: "off", intervention: null, replica: 0, noise_key: "991a1506a6285b33" }, { arm: "on", intervention: "reweigh", replica: 0, noise_key: "0186fccd944dd6dd" }], ...o });
const ask = async (agent, line) => JSON.parse(await agent.handleLine(line));

test("initialize: the declaration and capabilities; an unknown version refused with -32002", async () => {
  const a = createAgent(def({ fold: () => ({}), batch: 64 }));
  assert.deepEqual(await ask(a, req(1, "initialize", { protocol_versions: ["forklab-agent/1"], client: { name: "forklab", version: "0.1.0" } })), {
    jsonrpc: "2.0", id: 1, result: { protocol_version: "forklab-agent/1", agent: { name: "coin.mjs", version: "2" }, world: declaration, capabilities: { fold: true, batch: 64 } },
  });
  assert.deepEqual(await ask(a, req(1, "initialize", { protocol_versions: ["forklab-agent/999"], client: { name: "forklab", version: "0.1.0" } })), {
    jsonrpc: "2.0", id: 1, error: { code: -32002, message: "this agent speaks forklab-agent/1 only", data: { supported: ["forklab-agent/1"] } },
  });
});

test("start gets its params checked, defaults filled in; its reply is checked", async () => {
  const a = createAgent(def());
  const r = await ask(a, req(2, "start", startParams()));
  assert.deepEqual(r, { jsonrpc: "2.0", id: 2, result: { task: {}, forks: [fork(1), fork(3)] } });
  assert.deepEqual(seen.at(-1).params, { p: 0.5 });
  const refused = [
    [startParams({ seed: "seven" }), "start: params.seed must be an integer, got a string"],
    [{ seed: 1, params: {}, model: { temperature: 0, no_tool: 0 } }, "start: params.fork_steps is missing"],
    [startParams({ fork_steps: [0] }), "start: params.fork_steps[0] must be at least 1, got 0"],
    [startParams({ params: { p: 2 } }), "params.params.p must be a number in [0, 1], got 2"],
    [startParams({ params: { q: 1 } }), "params.params.q is not a declared parameter (p)"],
  ];
  for (const [p, message] of refused) assert.deepEqual(await ask(a, req(3, "start", p)), { jsonrpc: "2.0", id: 3, error: { code: -32602, message } });
});

test("a reply that breaks the protocol is an internal error naming the method and field, not retried", async () => {
  const cases = [
    [{ start: (p) => ({ task: {}, forks: p.fork_steps.map((k) => ({ ...fork(k), features: {} })) }) }, "start", startParams(), "the agent's start reply breaks forklab-agent/1: result.forks[0].features.heads is missing: the declaration lists it (int)"],
    [{ start: (p) => ({ task: {}, forks: p.fork_steps.map((k) => ({ ...fork(k), features: { heads: "1" } })) }) }, "start", startParams(), "the agent's start reply breaks forklab-agent/1: result.forks[0].features.heads must be an integer, got a string"],
    [{ start: () => ({ task: {}, forks: [fork(1)] }) }, "start", startParams(), "the agent's start reply breaks forklab-agent/1: result.forks holds 1 forks for 2 fork steps asked (1, 3)"],
    [{ start: (p) => ({ task: {}, forks: p.fork_steps.map(() => fork(2)) }) }, "start", startParams(), "the agent's start reply breaks forklab-agent/1: result.forks[0].fork_step is 2, but the fork step asked there is 1"],
    [{ start: (p) => ({ task: { x: 1 }, forks: p.fork_steps.map(fork) }) }, "start", startParams(), "the agent's start reply breaks forklab-agent/1: result.task.x is not declared: the declaration's task fields are none"],
    [{ start: (p) => ({ task: {}, forks: p.fork_steps.map((k) => ({ ...fork(k), cost: { steps: 1, usd: 1 } })) }) }, "start", startParams(), "the agent's start reply breaks forklab-agent/1: result.forks[0].cost.usd is not a declared cost field (steps)"],
    [{ branch: () => ({ branches: [{ success: true, cost: { steps: 1 } }] }) }, "branch", branchParams(), "the agent's branch reply breaks forklab-agent/1: result.branches holds 1 outcomes for 2 branches asked"],
    [{ branch: () => ({ branches: [{ success: 1, cost: { steps: 1 } }, { success: true, cost: { steps: 1 } }] }) }, "branch", branchParams(), "the agent's branch reply breaks forklab-agent/1: result.branches[0].success must be a boolean, got an integer"],
    [{ branch: () => [] }, "branch", branchParams(), "the agent's branch reply breaks forklab-agent/1: result must be an object, got an array"],
  ];
  for (const [over, method, params, message] of cases) {
    assert.deepEqual(await ask(createAgent(def(over)), req(4, method, params)), { jsonrpc: "2.0", id: 4, error: { code: -32603, message, data: { retryable: false } } });
  }
});

test("branch: an undeclared intervention is -32602; errors the agent throws keep their codes", async () => {
  const a = createAgent(def());
  const bad = branchParams({ branches: [{ arm: "on", intervention: "no_such_action_xyz", replica: 0, noise_key: "991a1506a6285b33" }] });
  assert.deepEqual(await ask(a, req(5, "branch", bad)), { jsonrpc: "2.0", id: 5, error: { code: -32602, message: 'params.branches[0].intervention: "no_such_action_xyz" is not a declared intervention (reweigh)' } });
  for (const [e, code, data] of [[new BadCheckpoint("not a coin"), -32001], [new InvalidParams("bad"), -32602], [new RunFailed("rate limited", { retryable: true }), -32000, { retryable: true }]]) {
    const r = await ask(createAgent(def({ branch: () => { throw e; } })), req(6, "branch", branchParams()));
    assert.deepEqual(r, { jsonrpc: "2.0", id: 6, error: { code, message: e.message, ...(data ? { data } : {}) } });
  }
  const crash = await ask(createAgent(def({ branch: () => { throw new TypeError("x is undefined"); } })), req(7, "branch", branchParams()));
  assert.deepEqual(crash, { jsonrpc: "2.0", id: 7, error: { code: codes.INTERNAL_ERROR, message: "branch: x is undefined" } });
});

test("branch hands sweep_id and branch_id through", async () => {
  const a = createAgent(def());
  const p = branchParams({ sweep_id: "s1" });
  p.branches[0].branch_id = "s1/5/1/off/0";
  await ask(a, req(8, "branch", p));
  assert.equal(seen.at(-1).sweep_id, "s1");
  assert.equal(seen.at(-1).branches[0].branch_id, "s1/5/1/off/0");
});

test("JSON-RPC: parse errors, invalid requests, unknown methods, notifications, batches", async () => {
  const a = createAgent(def());
  const parse = await ask(a, "{not json");
  assert.deepEqual([parse.id, parse.error.code], [null, -32700]);
  assert.match(parse.error.message, /^not JSON: Expected property name/);
  assert.deepEqual(await ask(a, '{"id":4,"method":"start"}'), { jsonrpc: "2.0", id: 4, error: { code: -32600, message: 'not a JSON-RPC 2.0 request: want an object with "jsonrpc": "2.0", a method and an id' } });
  assert.deepEqual(await ask(a, "[]"), { jsonrpc: "2.0", id: null, error: { code: -32600, message: "an empty batch" } });
  assert.deepEqual(await ask(a, req(9, "no_such_method", {})), { jsonrpc: "2.0", id: 9, error: { code: -32601, message: 'method "no_such_method" not found' } });
  assert.deepEqual(await ask(a, req(9, "fold", { stream: "s", offset: "o", events: [] })), { jsonrpc: "2.0", id: 9, error: { code: -32601, message: "this agent does not declare fold (give definition.fold)" } });
  assert.equal(await a.handleLine(JSON.stringify({ jsonrpc: "2.0", method: "start", params: {} })), null);
  const batch = await ask(a, `[${req(10, "start", startParams())},${req(11, "start", startParams({ seed: "x" }))},${req(12, "branch", branchParams())}]`);
  assert.deepEqual(batch.map((r) => [r.id, r.error?.code ?? "ok"]), [[10, "ok"], [11, -32602], [12, "ok"]]);
});

test("seeds beyond 2^53 arrive as BigInts and go back exactly", async () => {
  const a = createAgent(def({ start: (p) => ({ task: {}, forks: p.fork_steps.map((k) => ({ ...fork(k), checkpoint: { seed: p.seed } })) }) }));
  const line = await a.handleLine('{"jsonrpc":"2.0","id":2,"method":"start","params":{"seed":9223372036854775806,"fork_steps":[1],"params":{},"model":{"temperature":0,"no_tool":0.5}}}');
  assert.match(line, /"checkpoint":\{"seed":9223372036854775806\}/);
});

test("shutdown answers {} and marks the agent closed; further methods dispatch", async () => {
  let calls = 0;
  const a = createAgent(def({ shutdown: () => { calls++; }, methods: { echo: (p) => ({ said: p.say }) } }));
  assert.deepEqual(await ask(a, req(13, "echo", { say: "hi" })), { jsonrpc: "2.0", id: 13, result: { said: "hi" } });
  assert.equal(a.closed, false);
  assert.deepEqual(await ask(a, req(14, "shutdown", {})), { jsonrpc: "2.0", id: 14, result: {} });
  assert.equal(a.closed, true);
  assert.equal(calls, 1);
});

test("a malformed definition is refused at once, naming the field", () => {
  const cases = [
    [def({ start: undefined }), "definition.start must be a function, got undefined"],
    [def({ declaration: { ...declaration, features: [{ name: "heads", type: "str" }] } }), 'declaration.features[0].type must be one of "bool", "int", "float", "enum", got "str"'],
    [def({ methods: { start: () => 1 } }), "definition.methods.start: start is a built-in method: give it as definition.start"],
    [def({ capabilities: { colour: true } }), "definition.capabilities.colour is not a known field here (known: fold, batch, runs, inspect)"],
    [def({ batch: 5000 }), "definition.capabilities.batch must be at most 4096, got 5000"],
    [def({ agent: { version: "1" } }), "definition.agent.name is missing"],
  ];
  for (const [d, want] of cases) assert.throws(() => createAgent(d), (e) => e instanceof DeclarationError && e.message === want, want);
});

test("a declaration with volatile paths is sent whole", async () => {
  const volatile = ["forks[*].checkpoint.ts"];
  const a = createAgent(def({ declaration: { ...declaration, volatile } }));
  const r = await ask(a, req(1, "initialize", { protocol_versions: ["forklab-agent/1"], client: { name: "forklab", version: "0.1.0" } }));
  assert.deepEqual(r.result.world.volatile, volatile);
});

test("runs, load and inspect: declared as capabilities, params and replies checked as start's", async () => {
  const store = ["t-1", "t-2", "t-3"];
  const a = createAgent(def({
    runs: ({ cursor, limit }) => {
      const i = cursor === null ? 0 : Number(cursor);
      const page = store.slice(i, i + Math.min(limit, 2));
      return { runs: page.map((run_id) => ({ run_id, metadata: { tag: run_id } })), next_cursor: i + page.length < store.length ? String(i + page.length) : null };
    },
    load: (p) => (seen.push(p), p.run_id === "t-bad" ? { task: {}, forks: [{ ...fork(2), features: { heads: "one" } }] } : { task: {}, forks: p.fork_steps.map(fork) }),
    inspect: ({ checkpoint }) => ({ over: false, features: { heads: checkpoint.k }, hidden: { flawed: false }, cost: { steps: 1 } }),
  }));
  assert.deepEqual(a.initializeResult.capabilities, { runs: true, inspect: true });
  assert.deepEqual((await ask(a, req(2, "runs", { cursor: null, limit: 1000 }))).result, { runs: [{ run_id: "t-1", metadata: { tag: "t-1" } }, { run_id: "t-2", metadata: { tag: "t-2" } }], next_cursor: "2" });
  assert.deepEqual((await ask(a, req(3, "runs", { cursor: "2", limit: 1000 }))).result, { runs: [{ run_id: "t-3", metadata: { tag: "t-3" } }], next_cursor: null });
  assert.equal((await ask(a, req(4, "runs", { cursor: null }))).error.code, codes.INVALID_PARAMS);
  // load: the declared params' defaults filled in, as for start.
  assert.deepEqual((await ask(a, req(5, "load", { run_id: "t-1", fork_steps: [1, 3], params: {} }))).result, { task: {}, forks: [fork(1), fork(3)] });
  assert.deepEqual(seen.at(-1), { run_id: "t-1", fork_steps: [1, 3], params: { p: 0.5 } });
  const bad = await ask(a, req(6, "load", { run_id: "t-bad", fork_steps: [2], params: {} }));
  assert.equal(bad.error.code, codes.INTERNAL_ERROR);
  assert.match(bad.error.message, /load reply breaks forklab-agent\/1: result\.forks\[0\]\.features\.heads/);
  const short = await ask(a, req(7, "load", { run_id: "t-1", fork_steps: [2], params: { p: 2 } }));
  assert.equal(short.error.code, codes.INVALID_PARAMS);
  assert.deepEqual((await ask(a, req(8, "inspect", { checkpoint: { k: 4 }, fork_step: null }))).result, { over: false, features: { heads: 4 }, hidden: { flawed: false }, cost: { steps: 1 } });
  assert.equal((await ask(a, req(9, "inspect", { checkpoint: { k: "x" }, fork_step: 2 }))).error.code, codes.INTERNAL_ERROR);
  // A page listing a run twice is the agent's bug.
  const twice = createAgent(def({ runs: () => ({ runs: [{ run_id: "a" }, { run_id: "a" }], next_cursor: null }), load: () => null }));
  assert.match((await ask(twice, req(1, "runs", { cursor: null, limit: 5 }))).error.message, /result\.runs\[1\]\.run_id "a" is listed twice/);
  // Without them: not found, saying what to give.
  assert.deepEqual((await ask(createAgent(def()), req(1, "runs", { cursor: null, limit: 5 }))).error, { code: codes.METHOD_NOT_FOUND, message: "this agent does not declare runs (give definition.runs and definition.load)" });
  for (const [d, want] of [
    [def({ runs: () => ({}) }), "definition.load is missing: runs lists the recorded runs and load hands one back, so an agent gives both or neither"],
    [def({ load: () => ({}) }), "definition.runs is missing: runs lists the recorded runs and load hands one back, so an agent gives both or neither"],
    [def({ inspect: 3 }), "definition.inspect must be a function when given, got an integer"],
    [def({ methods: { runs: () => ({}) } }), "definition.methods.runs: runs is a built-in method: give it as definition.runs"],
  ]) assert.throws(() => createAgent(d), (e) => e instanceof DeclarationError && e.message === want);
});
