// graph.mjs — a returns-desk agent in LangGraph.js: a tool-calling loop
// (a model node, a ToolNode with three tools) on a scripted chat model that
// needs no network, and a re-check node, the recovery forklab measures.
// agent.mjs exposes it to forklab; nothing here knows of forklab.
//
// The task: a customer writes in about a broken item ("Hi, the coffee
// machine I ordered arrived broken. Can I return it?"). The agent must find
// the customer's orders, look the right one up and answer whether it can
// be returned, within a budget of model turns. What goes wrong, as with
// real models: when the message names the item by another word than the
// shop's ("coffee machine" for an "espresso maker"), the model often takes
// the customer's most recent order instead, and then answers about the
// wrong order. A tool call may also time out, costing a turn.
//
// The recovery is the node recheck: a model turn that re-reads the
// customer's message against the order in use and looks the right one up
// if they disagree. It rescues runs that took the wrong order; it costs a
// turn, which a run short of budget cannot spare, and a careful re-reading
// is itself wrong now and then. The placebo is the node think: a turn that
// costs the same and changes nothing.
//
// The environment — the customer, the orders, the tool timeouts — lives in
// the graph's state (env), where the tools read it: a checkpoint of the
// graph is the whole world, and a run resumed from it in another process
// plays on exactly.

import { createHash, randomUUID } from "node:crypto";
import { Annotation, MessagesAnnotation, StateGraph, START, END, getCurrentTaskInput } from "@langchain/langgraph";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import { tool } from "@langchain/core/tools";
import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { z } from "zod";

/** A number in [0, 1) drawn from its key's parts. */
export function draw(...parts) {
  return createHash("sha256").update(parts.join("|")).digest().readUIntBE(0, 6) / 2 ** 48;
}

// The shop's item names, and the words customers use for them.
const ITEMS = {
  "espresso maker": "coffee machine",
  "wireless headphones": "earbuds",
  "desk lamp": "reading light",
  "stand mixer": "food processor",
  "hiking backpack": "rucksack",
  "air fryer": "oven",
};
const NAMES = ["Ana", "Bilal", "Chen", "Dara", "Emeka", "Farah", "Goran", "Hana"];

/**
 * The world a seed draws: the customer, their orders (newest first), the
 * order they write about, and which tool calls time out. params: p_synonym,
 * p_tool_error, max_turns, max_orders (agent.mjs declares them).
 */
export function newEnv(seed, params) {
  const k = `task:${seed}`;
  const name = NAMES[Math.floor(draw(k, "name") * NAMES.length)];
  const n = 1 + Math.floor(draw(k, "orders") * params.max_orders);
  const items = Object.keys(ITEMS).sort((a, b) => draw(k, "item", a) - draw(k, "item", b)).slice(0, n);
  const orders = items.map((item, i) => ({
    id: `A${1000 + Math.floor(draw(k, "id", i) * 9000)}${i}`,
    item,
    date: `2025-05-${String(28 - 3 * i).padStart(2, "0")}`,
    returnable: draw(k, "returnable", i) < 0.6,
  }));
  const target = orders[Math.floor(draw(k, "target") * n)];
  const synonym = draw(k, "synonym") < params.p_synonym;
  return {
    customer: { name, email: `${name.toLowerCase()}@example.com` },
    orders,
    target: target.id,
    synonym,
    message: `Hi, it's ${name} (${name.toLowerCase()}@example.com). The ${synonym ? ITEMS[target.item] : target.item} I ordered arrived broken. Can I return it?`,
    max_turns: params.max_turns,
    timeouts: Array.from({ length: 3 * params.max_turns }, (_, i) => draw(k, "timeout", i) < params.p_tool_error),
    temperature: params.temperature,
  };
}

// ---------------------------------------------------------------------------
// Tools: they read the environment from the graph's state.

const env = () => getCurrentTaskInput().env;
const timedOut = () => {
  const calls = getCurrentTaskInput().messages.filter((m) => m.getType() === "tool").length;
  if (env().timeouts[calls]) throw new Error("timeout: the order service did not answer");
};

const findOrders = tool(
  ({ email }) => {
    timedOut();
    const e = env();
    return JSON.stringify(e.customer.email === email ? e.orders.map(({ id, item, date }) => ({ id, item, date })) : []);
  },
  { name: "find_orders", description: "List a customer's orders, newest first, by their email.", schema: z.object({ email: z.string() }) },
);
const getOrder = tool(
  ({ order_id }) => {
    timedOut();
    const o = env().orders.find((x) => x.id === order_id);
    return JSON.stringify(o ? { id: o.id, item: o.item, returnable: o.returnable } : { error: "no such order" });
  },
  { name: "get_order", description: "An order's item and whether it can be returned.", schema: z.object({ order_id: z.string() }) },
);
export const tools = [findOrders, getOrder];

// ---------------------------------------------------------------------------
// The scripted chat model: its reply is a function of the messages it is
// shown, of its temperature and of the call's seed (a sampling seed, as
// hosted models take). It reads the customer's message and the tool
// results, as a real model would; at temperature 0 it is greedy.

const RECHECK = "Re-read the customer's message carefully and check the order in use against it.";
const THINK = "Think the case over before you act.";
const DOUBT = "Let me re-check the order against the message.";
const THINKING = "Let me think this over.";

export class ScriptedChatModel extends BaseChatModel {
  _llmType() {
    return "scripted";
  }

  async _generate(messages, options) {
    const { content = "", tool_calls = [] } = this.reply(messages, options);
    const prompt = 150 + 30 * messages.length;
    const message = new AIMessage({ content, tool_calls, usage_metadata: { input_tokens: prompt, output_tokens: 40, total_tokens: prompt + 40 } });
    return { generations: [{ text: content, message }] };
  }

  reply(messages, { temperature = 0, seed = "" }) {
    const customer = String(messages.find((m) => m.getType() === "human").content);
    const turn = messages.filter((m) => m.getType() === "ai").length;
    const last = messages.at(-1);
    const instruction = last.getType() === "system" ? String(last.content) : "";
    const results = (name) => messages.filter((m) => m.getType() === "tool" && m.name === name && m.status !== "error").map((m) => JSON.parse(m.content));
    const orders = results("find_orders").at(-1);
    const looked = results("get_order").at(-1);
    // Tool-call ids are random, as a hosted model's are.
    const call = (name, args) => ({ tool_calls: [{ id: `call_${randomUUID().slice(0, 8)}`, name, args, type: "tool_call" }] });
    // The careful reading: the order whose item, or the word customers use
    // for it, the message names; a careful reader still errs now and then.
    // Among three orders or more, a careful reader still errs now and then.
    const careful = () => {
      const named = orders.find((o) => customer.includes(o.item) || customer.includes(ITEMS[o.item]));
      return orders.length < 3 || customer.includes(named.item) || draw(customer, "careful") >= 0.15 ? named : orders.find((o) => o !== named);
    };
    if (instruction === THINK) return { content: "Thinking it over: the customer wants to return a broken item." };
    if (instruction === RECHECK) {
      if (!orders || !looked) return { content: "Nothing to re-check yet: no order has been looked up." };
      const right = careful();
      return right.id === looked.id ? { content: `Order ${looked.id} matches the customer's message.` } : call("get_order", { order_id: right.id });
    }
    // Sampling: at temperature T a turn departs from the greedy reply with
    // probability T, and stalls.
    if (temperature > 0 && draw(seed, customer, turn, "depart") < temperature) return { content: THINKING };
    if (last.getType() === "tool" && last.status === "error") {
      const retry = messages.findLast((m) => m.getType() === "ai" && m.tool_calls?.length).tool_calls[0];
      return call(retry.name, retry.args);
    }
    if (!orders) return call("find_orders", { email: customer.match(/\(([^)]+@[^)]+)\)/)[1] });
    if (!looked) {
      // Greedy reading: the order whose shop name the message uses; failing
      // that, most often the newest order.
      const named = orders.find((o) => customer.includes(o.item));
      const pick = named ?? (draw(customer, "misread") < 0.7 ? orders[0] : careful());
      return call("get_order", { order_id: pick.id });
    }
    // Now and then the model doubts an order its message does not name, and
    // asks for a re-check itself (once).
    const rechecked = messages.some((m) => m.getType() === "ai" && /^(Let me re-check|Nothing to re-check|Order \S+ matches)/.test(m.content)) || results("get_order").length > 1;
    if (!customer.includes(looked.item) && !rechecked && draw(customer, "doubt") < 0.1) return { content: DOUBT };
    return { content: `Order ${looked.id} (${looked.item}): ${looked.returnable ? "eligible for a return" : "not eligible for a return"}.` };
  }
}

// ---------------------------------------------------------------------------
// The graph.

export const State = Annotation.Root({
  ...MessagesAnnotation.spec,
  env: Annotation(),
});

const model = new ScriptedChatModel({});
const turns = (messages) => messages.filter((m) => m.getType() === "ai" && m.usage_metadata).length;
const sampling = (state, config) => ({ temperature: state.env.temperature, seed: config.configurable?.forklab?.noise ?? "" });

async function agent(state, config) {
  if (turns(state.messages) >= state.env.max_turns) return { messages: [new AIMessage("Sorry, I could not sort this out in time: a colleague will follow up.")] };
  return { messages: [await model.invoke(state.messages, sampling(state, config))] };
}

// The recovery: one careful model turn; the instruction is the prompt's,
// not the conversation's.
async function recheck(state, config) {
  return { messages: [await model.invoke([...state.messages, { role: "system", content: RECHECK }], sampling(state, config))] };
}

async function think(state, config) {
  return { messages: [await model.invoke([...state.messages, { role: "system", content: THINK }], sampling(state, config))] };
}

const toolCalls = (state) => state.messages.at(-1).tool_calls?.length > 0;

// After a model turn: its tool calls, a re-check or a pause it asks for, or
// the end (its answer).
function next(state) {
  const last = state.messages.at(-1);
  if (toolCalls(state)) return "tools";
  return last.content === DOUBT ? "recheck" : last.content === THINKING ? "think" : END;
}

export function buildGraph(checkpointer) {
  return new StateGraph(State)
    .addNode("agent", agent)
    .addNode("tools", new ToolNode(tools))
    .addNode("recheck", recheck)
    .addNode("think", think)
    .addEdge(START, "agent")
    .addConditionalEdges("agent", next, ["tools", "recheck", "think", END])
    .addConditionalEdges("recheck", (s) => (toolCalls(s) ? "tools" : "agent"), ["tools", "agent"])
    .addEdge("think", "agent")
    .addEdge("tools", "agent")
    .compile({ checkpointer });
}

/** The customer's first message: the run's input. */
export const input = (env) => ({ messages: [new HumanMessage(env.message)], env });

/** The task's goal: the last message answers for the right order, rightly. */
export function solved(state) {
  const order = state.env.orders.find((o) => o.id === state.env.target);
  return String(state.messages.at(-1).content).startsWith(`Order ${order.id} (${order.item}): ${order.returnable ? "eligible" : "not eligible"}`);
}
