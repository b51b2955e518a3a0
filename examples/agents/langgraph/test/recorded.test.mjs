// The LangGraph adapter's recorded runs (options.recorded): runs lists a
// checkpointer's threads a page at a time; load hands a thread back as
// start hands back a seed's run, at the adapter's own steps.
import { test } from "node:test";
import assert from "node:assert/strict";
import { MemorySaver } from "@langchain/langgraph";
import { createAgent, DeclarationError } from "@forklab/agent";
import { langgraph } from "@forklab/agent/langgraph";
import { agent } from "../agent.mjs";
import { buildGraph, input, newEnv } from "../graph.mjs";

const params = { p_synonym: 0.5, p_tool_error: 0.15, max_turns: 4, max_orders: 4 };
const model = { temperature: 0, no_tool: 0.5 };
const ask = async (a, method, p) => JSON.parse(await a.handleLine(JSON.stringify({ jsonrpc: "2.0", id: 1, method, params: p })));
// A checkpoint's content but for what start's interruptBefore stops add
// to versions_seen (its __interrupt__ entry), which a branch never reads.
const plain = (f) => {
  const cp = structuredClone(f.checkpoint);
  delete cp.langgraph.versions_seen.__interrupt__;
  return { ...f, checkpoint: cp };
};

test("the example's recorded store: its tickets, paged by thread id, with their metadata", async () => {
  const a = createAgent(agent);
  assert.deepEqual(a.initializeResult.capabilities, { runs: true, inspect: true });
  const ids = [];
  let cursor = null;
  let pages = 0;
  do {
    const r = (await ask(a, "runs", { cursor, limit: 5 })).result;
    ids.push(...r.runs.map((x) => x.run_id));
    if (pages === 0) assert.deepEqual(r.runs[0], { run_id: "ticket-1001", metadata: { customer: "Hana", day: "2026-03-02" } });
    cursor = r.next_cursor;
    pages++;
  } while (cursor !== null);
  assert.equal(pages, 3);
  assert.deepEqual(ids, Array.from({ length: 12 }, (_, i) => `ticket-${1001 + i}`));
});

test("load: a thread recorded from seed S gives start's task and forks for S", async () => {
  const a = createAgent(agent);
  for (const [id, seed] of [["ticket-1004", 3], ["ticket-1008", 7]]) {
    const steps = [1, 2, 3, 9];
    const loaded = (await ask(a, "load", { run_id: id, fork_steps: steps, params: {} })).result;
    const started = (await ask(a, "start", { seed, fork_steps: steps, params, model })).result;
    assert.deepEqual(loaded.task, started.task);
    assert.equal(loaded.forks.at(-1).over, true);
    assert.deepEqual(loaded.forks.map(plain), started.forks.map(plain));
    // No pending writes: the checkpoint is LangGraph's checkpoint alone.
    assert.deepEqual(Object.keys(loaded.forks[1].checkpoint).sort(), ["langgraph", "step"]);
  }
  const none = await ask(a, "load", { run_id: "ticket-9999", fork_steps: [2], params: {} });
  assert.deepEqual(none.error, { code: -32602, message: 'params.run_id: the recorded checkpointer holds no thread "ticket-9999"' });
});

test("load: a thread stopped short of a fork step while not over is refused; one resumed at a stop counts that step once", async () => {
  const store = new MemorySaver();
  const prod = buildGraph(store);
  const env = newEnv(7, { ...params, temperature: 0 });
  // A thread still running: stopped before its second model turn.
  const running = { configurable: { thread_id: "running" } };
  await prod.invoke(input(env), { ...running, interruptBefore: ["agent"] });
  await prod.invoke(null, { ...running, interruptBefore: ["agent"] });
  // A thread stopped before its first turn, then resumed to its end.
  const resumed = { configurable: { thread_id: "resumed" } };
  await prod.invoke(input(env), { ...resumed, interruptBefore: ["agent"] });
  await prod.invoke(null, resumed);
  const a = createAgent(langgraph({ ...lgOptions(), recorded: { checkpointer: store } }));
  assert.deepEqual((await ask(a, "runs", { cursor: null, limit: 1 })).result, { runs: [{ run_id: "resumed" }], next_cursor: "resumed" });
  assert.deepEqual((await ask(a, "runs", { cursor: "resumed", limit: 1 })).result, { runs: [{ run_id: "running" }], next_cursor: null });
  const r1 = await ask(a, "load", { run_id: "running", fork_steps: [1], params: {} });
  assert.equal(r1.result?.forks[0].over, false, JSON.stringify(r1.error));
  assert.deepEqual((await ask(a, "load", { run_id: "running", fork_steps: [1, 2], params: {} })).error, {
    code: -32602, message: 'thread "running" has taken 1 step and is not over: it has no checkpoint at fork step 2',
  });
  const started = (await ask(a, "start", { seed: 7, fork_steps: [1, 2, 9], params, model })).result;
  const loaded = (await ask(a, "load", { run_id: "resumed", fork_steps: [1, 2, 9], params: {} })).result;
  assert.deepEqual(loaded.forks.map((f) => [f.features, f.over]), started.forks.map((f) => [f.features, f.over]));
  assert.throws(() => langgraph({ ...lgOptions(), recorded: { checkpointer: {} } }), (e) => e instanceof DeclarationError && /options\.recorded\.checkpointer must be a LangGraph checkpointer/.test(e.message));
});

// The example's options, from its definition's parts: agent.mjs exports
// the definition only, so these rebuild the few the test needs.
function lgOptions() {
  const looked = (s) => s.messages.filter((m) => m.getType() === "tool" && m.name === "get_order" && m.status !== "error").map((m) => JSON.parse(m.content)).at(-1);
  return {
    declaration: agent.declaration,
    graph: buildGraph(new MemorySaver()),
    input: ({ seed, params: p, model: m }) => input(newEnv(seed, { ...p, temperature: m.temperature })),
    task: (s) => ({ orders: s.env.orders.length, synonym: s.env.synonym }),
    features: (s) => ({ orders_found: 0, picked: looked(s) !== undefined, item_named: false, turns_left: Math.max(0, s.env.max_turns - s.messages.filter((m) => m.getType() === "ai" && m.usage_metadata).length), tool_errors: 0 }),
    hidden: (s) => ({ wrong_order: looked(s) !== undefined && looked(s).id !== s.env.target }),
    cost: () => ({ steps: 0, tokens: 0, usd: 0 }),
    success: () => true,
  };
}

test("inspect: a stored checkpoint's over, features, hidden truth and cost, as start gave them", async () => {
  const a = createAgent(agent);
  const started = (await ask(a, "start", { seed: 7, fork_steps: [1, 2, 9], params, model })).result;
  for (const f of started.forks) {
    const got = (await ask(a, "inspect", { checkpoint: f.checkpoint, fork_step: null })).result;
    assert.deepEqual(got, { over: f.over, features: f.features, hidden: f.hidden, cost: f.cost });
  }
  assert.equal((await ask(a, "inspect", { checkpoint: { seed: 7 }, fork_step: 2 })).error.code, -32001);
});
