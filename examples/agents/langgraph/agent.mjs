#!/usr/bin/env node
// agent.mjs — the returns-desk graph of graph.mjs in forklab's fork lab,
// through the LangGraph adapter of the Node SDK (docs/sdk-node.md). This is
// all the glue: the declaration, how a seed becomes the graph's input, the
// features an observer sees at a checkpoint, the hidden truth, the cost and
// the outcome. The interventions are the graph's nodes recheck and think.
//
//   npm ci && forklab agent check 'node agent.mjs'
//   forklab sweep --agent 'node agent.mjs' --parallel 2 --seeds 0:1000 --fork-at 2 --arms off,on,placebo,aa --out returns
//
// It also holds a recorded store, as a team's production checkpointer
// does: the tickets of recorded.json, played into their own MemorySaver
// under their thread ids (ticket-1001, …) with their metadata. The
// adapter's runs and load hand them to forklab, to fork them instead of
// seeds:
//
//   forklab sweep --agent 'node agent.mjs' --runs agent: --fork-at 2 --out tickets

import { serve } from "@forklab/agent";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { MemorySaver } from "@langchain/langgraph";
import { langgraph } from "@forklab/agent/langgraph";
import { buildGraph, input, newEnv, solved } from "./graph.mjs";

const declaration = {
  name: "returns_desk", version: "1",
  description: "A LangGraph returns-desk agent: find the customer's orders, look the right one up, say whether it can be returned. A message that names the item by another word misleads the model.",
  params: [
    { name: "p_synonym", type: "float", default: 0.5, min: 0, max: 1, description: "probability that the message names the item by another word than the shop's" },
    { name: "p_tool_error", type: "float", default: 0.15, min: 0, max: 1, description: "probability that a tool call times out" },
    { name: "max_turns", type: "int", default: 4, min: 3, max: 20, description: "the budget of model turns" },
    { name: "max_orders", type: "int", default: 4, min: 1, max: 6, description: "the most orders a customer has" },
  ],
  task: [{ name: "orders", type: "int", description: "the customer's orders" }, { name: "synonym", type: "bool", description: "the message names the item by another word" }],
  features: [
    { name: "orders_found", type: "int", description: "orders the last find_orders listed (0 before it answered)" },
    { name: "picked", type: "bool", description: "an order has been looked up" },
    { name: "item_named", type: "bool", description: "the message names the item of the order looked up, as the shop does" },
    { name: "turns_left", type: "int", unit: "turns", description: "model turns left in the budget" },
    { name: "tool_errors", type: "int", description: "tool calls that timed out so far" },
  ],
  hidden: [{ name: "wrong_order", type: "bool", description: "the order looked up is not the one the customer means" }],
  fault_flag: "wrong_order",
  interventions: [
    { arm: "on", action: "recheck", description: "a model turn re-reading the message against the order in use, looking the right one up if they disagree" },
    { arm: "placebo", action: "think", description: "a model turn thinking it over: the same cost, nothing checked" },
  ],
  cost: { fields: ["steps", "tokens", "usd"], description: "model turns; their tokens, as the model reports them; $2 per million tokens" },
};

const toolResults = (s, name) => s.messages.filter((m) => m.getType() === "tool" && m.name === name && m.status !== "error").map((m) => JSON.parse(m.content));
const looked = (s) => toolResults(s, "get_order").at(-1);
const modelTurns = (s) => s.messages.filter((m) => m.getType() === "ai" && m.usage_metadata);
const tokens = (s) => modelTurns(s).reduce((n, m) => n + m.usage_metadata.total_tokens, 0);

// The recorded store: the production checkpointer of this example. A team
// hands the adapter its own (a SqliteSaver, a PostgresSaver) instead.
const recordedStore = new MemorySaver();
const tickets = JSON.parse(readFileSync(new URL("./recorded.json", import.meta.url), "utf8")).threads;
const defaults = Object.fromEntries(declaration.params.map((p) => [p.name, p.default]));
let recording;
// Plays each ticket from its seed into the store, once, as production
// played it: no forklab sweep, no interrupts.
const ticketOf = new Map(tickets.map((t) => [t.thread_id, t]));
const recorded = () =>
  (recording ??= (async () => {
    const production = buildGraph(recordedStore);
    for (const t of tickets) {
      const forklab = { seed: t.seed, noise: `seed:${t.seed}` };
      await production.invoke(input(newEnv(t.seed, { ...defaults, temperature: 0 })), { configurable: { thread_id: t.thread_id, forklab } });
    }
  })());

const returnsDesk = langgraph({
  declaration,
  graph: buildGraph(new MemorySaver()),
  // The threads are the store's; their metadata, the ticket system's.
  recorded: { checkpointer: recordedStore, metadata: (threadId) => ticketOf.get(threadId)?.metadata ?? null },
  input: ({ seed, params, model }) => input(newEnv(seed, { ...params, temperature: model.temperature })),
  task: (s) => ({ orders: s.env.orders.length, synonym: s.env.synonym }),
  features: (s) => ({
    orders_found: toolResults(s, "find_orders").at(-1)?.length ?? 0,
    picked: looked(s) !== undefined,
    item_named: looked(s) !== undefined && s.messages[0].content.includes(looked(s).item),
    turns_left: Math.max(0, s.env.max_turns - modelTurns(s).length),
    tool_errors: s.messages.filter((m) => m.getType() === "tool" && m.status === "error").length,
  }),
  hidden: (s) => ({ wrong_order: looked(s) !== undefined && looked(s).id !== s.env.target }),
  cost: (s) => ({ steps: modelTurns(s).length, tokens: tokens(s), usd: (tokens(s) * 2) / 1e6 }),
  success: solved,
  details: (s) => ({ answer: String(s.messages.at(-1).content) }),
});

// Recorded only when forklab first asks for the store: start and branch
// never wait for it.
export const agent = {
  ...returnsDesk,
  runs: async (p) => (await recorded(), returnsDesk.runs(p)),
  load: async (p) => (await recorded(), returnsDesk.load(p)),
};

if (process.argv[1] === fileURLToPath(import.meta.url)) serve(agent);
