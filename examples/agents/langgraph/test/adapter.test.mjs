// The LangGraph adapter (@forklab/agent/langgraph) on the returns-desk graph
// and on small graphs of its own: canonical checkpoints, no pending writes,
// branches that end as LangGraph's own time travel ends them, runs already
// over, thread names, and the mistakes it names.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Annotation, Command, END, MemorySaver, MessagesAnnotation, START, StateGraph, interrupt } from "@langchain/langgraph";
import { AIMessage } from "@langchain/core/messages";
import { createAgent, DeclarationError } from "@forklab/agent";
import { langgraph, canonicalize, CANONICAL_TS } from "@forklab/agent/langgraph";
import { agent } from "../agent.mjs";
import { buildGraph, input, newEnv, solved } from "../graph.mjs";

const params = { p_synonym: 0.5, p_tool_error: 0.15, max_turns: 4, max_orders: 4 };
const model = { temperature: 0, no_tool: 0.5 };
const arms = [
  { arm: "off", intervention: null, replica: 0, noise_key: "991a1506a6285b33" },
  { arm: "on", intervention: "recheck", replica: 0, noise_key: "0186fccd944dd6dd" },
  { arm: "placebo", intervention: "think", replica: 0, noise_key: "77aa0e1b2c3d4e5f" },
  { arm: "aa", intervention: null, replica: 0, noise_key: "4de7e31e265a13b6" },
];

test("a checkpoint is made canonical: ids and timestamps fixed, message and tool-call ids numbered in order", () => {
  const msg = (type, kwargs) => ({ lc: 1, type: "constructor", id: ["langchain_core", "messages", type], kwargs });
  const cp = {
    v: 4, id: "1f1eded5-74aa-6da0-8004-28132622a989", ts: "2026-12-02T01:11:45.274Z",
    channel_values: {
      messages: [
        msg("HumanMessage", { content: "hi", id: "e73122b7-0f51-43a4-9107-3a88294c868e" }),
        msg("AIMessage", { content: "", id: "run-2c4d", tool_calls: [{ id: "call_e795", name: "f", args: {} }] }),
        msg("ToolMessage", { content: "r", tool_call_id: "call_e795", id: "3331" }),
      ],
      other: { last: msg("AIMessage", { content: "", id: "run-2c4d" }) },
    },
  };
  canonicalize(cp, 3);
  assert.equal(cp.id, "00000000-0000-6000-8000-000000000003");
  assert.equal(cp.ts, CANONICAL_TS);
  const m = cp.channel_values.messages.map((x) => x.kwargs);
  assert.deepEqual([m[0].id, m[1].id, m[1].tool_calls[0].id, m[2].tool_call_id, m[2].id], ["msg-1", "msg-2", "call-1", "call-1", "msg-3"]);
  assert.equal(cp.channel_values.other.last.kwargs.id, "msg-2");
});

test("start is repeatable and stores LangGraph's checkpoint without pending writes", async () => {
  const a = await agent.start({ seed: 7, fork_steps: [1, 2], params, model });
  const b = await agent.start({ seed: 7, fork_steps: [1, 2], params, model });
  assert.equal(JSON.stringify(a), JSON.stringify(b));
  const cp = a.forks[1].checkpoint;
  assert.deepEqual(Object.keys(cp), ["langgraph", "step"]);
  assert.deepEqual(Object.keys(cp.langgraph), ["v", "id", "ts", "channel_values", "channel_versions", "versions_seen"]);
  assert.deepEqual(cp.langgraph.channel_values.messages.map((m) => m.kwargs.id), ["msg-1", "msg-2", "msg-3", "msg-4", "msg-5"]);
  // The run had taken two steps: two model turns, each with its tool's answer.
  assert.deepEqual(a.forks.map((f) => f.cost.steps), [1, 2]);
});

// The same experiment with LangGraph's own time travel, in one thread: the
// run played to its end, the fork found in its history, each arm forked
// from a copy of it (a copy, because a past checkpoint carries the writes
// of the step that followed it).
async function timeTravel(seed, k) {
  const saver = new MemorySaver();
  const graph = buildGraph(saver);
  const thread = { configurable: { thread_id: "t" } };
  await graph.invoke(input(newEnv(seed, { ...params, temperature: 0 })), thread);
  const history = [];
  for await (const s of graph.getStateHistory(thread)) history.unshift(s);
  const fork = history.filter((s) => s.next.includes("agent"))[k] ?? history.at(-1);
  const out = {};
  for (const b of arms) {
    if (fork.next.length === 0) {
      out[b.arm] = solved(fork.values);
      continue;
    }
    let at = await graph.updateState(fork.config, null, "__copy__");
    if (b.intervention) {
      at = await graph.updateState(at, null, END);
      await graph.invoke(new Command({ goto: b.intervention }), at);
    } else await graph.invoke(null, at);
    out[b.arm] = solved((await graph.getState(thread)).values);
  }
  return out;
}

test("branches end as LangGraph's own time travel ends them", async () => {
  let differ = 0;
  for (let seed = 0; seed < 24; seed++) {
    const s = await agent.start({ seed, fork_steps: [2], params, model });
    const r = await agent.branch({ seed, fork_step: 2, checkpoint: s.forks[0].checkpoint, branches: arms });
    const ours = Object.fromEntries(arms.map((b, i) => [b.arm, r.branches[i].success]));
    assert.deepEqual(ours, await timeTravel(seed, 2), `seed ${seed}`);
    if (ours.on !== ours.off) differ++;
  }
  assert.ok(differ > 0, "no seed of 0:24 where the recovery changes the outcome");
});

test("a past checkpoint carries the next step's writes: updateState(…, END) on it replays the original answer", async () => {
  // Seed 1: the run answers rightly at its third turn. Forked before that
  // turn, the original thread's checkpoint brings the answer back with it;
  // the adapter's re-check branch runs the re-check, then answers anew.
  const saver = new MemorySaver();
  const graph = buildGraph(saver);
  const thread = { configurable: { thread_id: "t" } };
  await graph.invoke(input(newEnv(1, { ...params, temperature: 0 })), thread);
  const history = [];
  for await (const s of graph.getStateHistory(thread)) history.unshift(s);
  const fork = history.filter((s) => s.next.includes("agent"))[2];
  const at = await graph.updateState(fork.config, null, END);
  const replayed = (await graph.getState(at)).values.messages.at(-1).content;
  assert.match(replayed, /^Order \S+ \(.*\): /, "updateState(…, END) on the original checkpoint applied its pending answer");
  const s = await agent.start({ seed: 1, fork_steps: [2], params, model });
  const r = await agent.branch({ seed: 1, fork_step: 2, checkpoint: s.forks[0].checkpoint, branches: [arms[1]] });
  assert.deepEqual([r.branches[0].success, r.branches[0].details.answer], [true, replayed]);
});

test("a run over before the fork keeps its outcome in every arm; an intervention is charged", async () => {
  const s = await agent.start({ seed: 1, fork_steps: [2, 9], params, model });
  const over = s.forks[1];
  assert.equal(over.over, true);
  const r = await agent.branch({ seed: 1, fork_step: 9, checkpoint: over.checkpoint, branches: arms });
  const final = r.branches[0].success;
  assert.deepEqual(r.branches.map((b) => b.success), [final, final, final, final]);
  assert.deepEqual(r.branches.map((b) => b.cost.steps), [0, 1, 1, 0]);
});

test("a branch's thread is named after its branch_id, or after seed, fork step, arm, replica and noise key", async () => {
  const s = await agent.start({ seed: 3, fork_steps: [2], params, model });
  const withId = [{ ...arms[0], branch_id: "d9f1/3/2/off/0" }, arms[1]];
  const r = await agent.branch({ seed: 3, fork_step: 2, checkpoint: s.forks[0].checkpoint, branches: withId, sweep_id: "d9f1" });
  assert.deepEqual(r.branches.map((b) => b.details.thread_id), ["d9f1/3/2/off/0", "forklab/3/2/on/0/0186fccd944dd6dd"]);
});

// A graph of two nodes: model (the step) loops until it has taken three
// turns; fix, the intervention, marks the state fixed.
function tiny(saver, extra) {
  const State = Annotation.Root({ ...MessagesAnnotation.spec, turns: Annotation({ reducer: (_, b) => b, default: () => 0 }), fixed: Annotation({ reducer: (_, b) => b, default: () => false }) });
  const g = new StateGraph(State)
    .addNode("model", (s) => ({ turns: s.turns + 1, messages: [new AIMessage(`turn ${s.turns + 1}`)] }))
    .addNode("fix", (s) => ({ fixed: true, turns: s.turns + 1, messages: [new AIMessage("fixed")] }))
    .addEdge(START, "model")
    .addConditionalEdges("model", (s) => (s.turns < 3 ? "model" : END), ["model", "fix", END])
    .addEdge("fix", "model");
  extra?.(g);
  return g.compile({ checkpointer: saver });
}
const tinyDecl = { name: "tiny", version: "1", features: [{ name: "turns", type: "int" }], interventions: [{ arm: "on", action: "fix" }], cost: { fields: ["steps"] } };
const tinyOptions = (graph, o = {}) => ({ declaration: tinyDecl, graph, input: () => ({ messages: [] }), features: (s) => ({ turns: s.turns }), cost: (s) => ({ steps: s.turns }), success: (s) => s.fixed, ...o });

test("in-memory threads are dropped once read; kept on request", async () => {
  const saver = new MemorySaver();
  const def = langgraph(tinyOptions(tiny(saver)));
  const s = await def.start({ seed: 1, fork_steps: [1], params: {}, model });
  const r = await def.branch({ seed: 1, fork_step: 1, checkpoint: s.forks[0].checkpoint, branches: [arms[0], { ...arms[1], intervention: "fix" }] });
  // off: turns 2 and 3; on: fix (turn 2), then the model's turn 3.
  assert.deepEqual(r.branches.map((b) => [b.success, b.cost.steps]), [[false, 2], [true, 2]]);
  assert.deepEqual(Object.keys(saver.storage), []);
  const kept = new MemorySaver();
  const def2 = langgraph(tinyOptions(tiny(kept), { keepThreads: true }));
  await def2.start({ seed: 1, fork_steps: [1], params: {}, model });
  assert.deepEqual(Object.keys(kept.storage), ["forklab/start/1"]);
});

test("mistakes are named: a step or intervention that is no node, no checkpointer, a foreign checkpoint, interrupt()", async () => {
  const graph = tiny(new MemorySaver());
  assert.throws(() => langgraph(tinyOptions(graph, { step: "llm" })), (e) => e instanceof DeclarationError && e.message === 'langgraph options.step: "llm" is not a node of the graph (model, fix)');
  assert.throws(() => langgraph(tinyOptions(graph, { interventions: { fix: "repair" } })), (e) => e instanceof DeclarationError && /declaration.interventions\[0\] \(arm on\) applies "fix", routed to node "repair", which is not a node of the graph/.test(e.message));
  assert.throws(() => langgraph(tinyOptions(tiny(undefined))), (e) => e instanceof DeclarationError && /the graph has no checkpointer/.test(e.message));
  const a = createAgent(langgraph(tinyOptions(graph)));
  const line = JSON.stringify({ jsonrpc: "2.0", id: 3, method: "branch", params: { seed: 1, fork_step: 1, checkpoint: { forged: true, state: "nothing" }, branches: [arms[0]] } });
  assert.deepEqual(JSON.parse(await a.handleLine(line)).error.code, -32001);
  const AskState = Annotation.Root({ n: Annotation({ reducer: (_, b) => b, default: () => 0 }) });
  const asking = new StateGraph(AskState)
    .addNode("ask", () => ({ n: interrupt("approve?") }))
    .addNode("model", (s) => ({ n: s.n + 1 }))
    .addEdge(START, "ask").addEdge("ask", "model").addEdge("model", END)
    .compile({ checkpointer: new MemorySaver() });
  const def = langgraph({ ...tinyOptions(asking, { step: "model" }), declaration: { ...tinyDecl, interventions: [] }, features: (s) => ({ turns: s.n }), cost: (s) => ({ steps: s.n }) });
  await assert.rejects(def.start({ seed: 1, fork_steps: [1], params: {}, model }), { message: "the graph called interrupt() in ask: the adapter plays runs without a human to answer it" });
});
