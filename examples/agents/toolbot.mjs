#!/usr/bin/env node
// toolbot.mjs — a small customer-support agent loop, speaking forklab-agent/1
// (docs/agent-protocol.md) on stdin/stdout through the Node SDK (sdk/node,
// docs/sdk-node.md). Node 18+; the SDK has no dependencies.
//
//   forklab agent check 'node examples/agents/toolbot.mjs'
//   forklab sweep --agent 'node examples/agents/toolbot.mjs' --parallel 2 --seeds 0:2000 --fork-at 2 --arms off,on,placebo,aa --out toolbot
//
// The task: a customer writes in about an order ("Hi, it's Ana — order
// A4017 arrived broken, can I get a refund?"). The agent has two tools,
// lookup_order(id) and check_refund_policy(id), and must answer with the
// right order's refund decision within a budget of model turns. Its model is
// scripted (deterministic, seeded): it extracts the order id from the
// message, calls the tools, and answers. What goes wrong, as with real
// models: a hard-to-read message makes the model misread the id, and the
// misread id may belong to another customer's order — the tool then answers
// happily about the wrong order, and the agent answers about it too. The
// tool also fails now and then (a timeout), costing a turn.
//
// The recovery (arm on) is reread_message: spend a turn re-reading the
// customer's message carefully, then look the order up again. It rescues
// runs that went down the wrong order; it harms runs that were fine but
// cannot spare the turn. The placebo is think: a turn that costs the same and
// changes nothing.
//
// How a real agent exposes itself to the fork lab:
//  - the checkpoint is the agent's whole state as plain JSON: the transcript
//    (the messages the model has seen, tool calls and results) plus the
//    counters the loop keeps. Nothing lives only in the process, so a
//    checkpoint forks in any process, at any later time;
//  - the features are what an observer could compute from the transcript
//    before deciding to recover (the last tool result, repeated misses, a
//    customer name that does not match the order), never the hidden truth
//    (whether the id in use is wrong), which is reported apart;
//  - every random draw is a hash of a key and what is drawn: the world's
//    draws keyed by the seed, the model's by the seed before the fork and by
//    the branch's noise_key after it. Same request, same outcome;
//  - task seeds go up to 2^63-2, beyond what a JavaScript number holds
//    exactly: the SDK reads a seed above 2^53 as a BigInt (and writes it
//    back exactly), so seed 9007199254740993 is that seed, not
//    9007199254740992; `task:${seed}` spells both kinds the same.

import { serve, BadCheckpoint } from "../../sdk/node/src/index.js";

const DECLARATION = {
  name: "toolbot",
  version: "1",
  description: "A customer-support agent loop: extract the order id from the customer's message, look the order up, check its refund policy, answer. The scripted model misreads hard-to-read ids; a misread id may be another customer's order.",
  params: [
    { name: "p_hard", type: "float", default: 0.35, min: 0, max: 1, description: "probability that a customer's message writes the order id hard to read" },
    { name: "p_tool_error", type: "float", default: 0.1, min: 0, max: 1, description: "probability that a tool call times out (the turn is lost)" },
    { name: "max_turns", type: "int", default: 6, min: 3, max: 50, description: "the budget of model turns" },
  ],
  task: [
    { name: "hard_message", type: "bool", description: "the message writes the order id hard to read" },
    { name: "nickname", type: "bool", description: "the order is registered under the customer's nickname" },
  ],
  features: [
    { name: "last_tool", type: "enum", values: ["none", "found", "not_found", "error"], description: "the result of the last tool call" },
    { name: "misses", type: "int", description: "lookups that found no order so far" },
    { name: "name_mismatch", type: "bool", description: "the order found is under another name than the customer's (a nickname, or another customer)" },
    { name: "turns_left", type: "int", unit: "turns", description: "model turns left in the budget" },
    { name: "tokens_used", type: "int", unit: "tokens", description: "tokens spent so far, prompt and completion" },
  ],
  hidden: [
    { name: "wrong_order", type: "bool", description: "the order id in use is not the customer's (the model misread it)" },
    { name: "hard", type: "bool", description: "the message is hard to read" },
  ],
  fault_flag: "wrong_order",
  actions: ["no_tool", "lookup_order", "check_refund_policy", "answer", "reread_message", "think"],
  interventions: [
    { arm: "on", action: "reread_message", description: "spend a turn re-reading the customer's message carefully; the next lookup uses the right id" },
    { arm: "placebo", action: "think", description: "spend a turn thinking: same cost, nothing learnt" },
  ],
  cost: { fields: ["steps", "tokens", "usd"], description: "each model turn costs 150 prompt tokens plus 30 per message in the transcript, and 40 completion tokens; $2 per million tokens" },
};

// ---------------------------------------------------------------------------
// Deterministic draws: a float in [0, 1) from (key, purpose, index).

function draw(key, purpose, index) {
  let h = 0x811c9dc5; // FNV-1a, then a murmur-style finaliser
  for (const c of `${key}|${purpose}|${index}`) {
    h ^= c.charCodeAt(0);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16; h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13; h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return (h >>> 0) / 4294967296;
}

const NAMES = ["Ana", "Bilal", "Chen", "Dara", "Emeka", "Farah", "Goran", "Hana"];
const ITEMS = ["kettle", "lamp", "backpack", "headphones", "desk chair", "blender"];

// The world a seed draws: the customer, the order, the message, and the
// order a misread id would find.
function task(seed, params) {
  const k = `task:${seed}`;
  const digits = String(1000 + Math.floor(draw(k, "id", 0) * 9000));
  const id = `A${digits}`;
  const name = NAMES[Math.floor(draw(k, "name", 0) * NAMES.length)];
  const hard = draw(k, "hard", 0) < params.p_hard;
  const nickname = draw(k, "nick", 0) < 0.25;
  // A misread swaps one digit; half the time that id is another customer's order.
  const pos = Math.floor(draw(k, "pos", 0) * 4);
  const other = String((Number(digits[pos]) + 1 + Math.floor(draw(k, "digit", 0) * 9)) % 10);
  const misread = `A${digits.slice(0, pos)}${other}${digits.slice(pos + 1)}`;
  const misreadExists = draw(k, "exists", 0) < 0.5;
  const otherName = NAMES[(NAMES.indexOf(name) + 1 + Math.floor(draw(k, "other", 0) * (NAMES.length - 1))) % NAMES.length];
  return {
    id, name, hard, nickname, misread,
    orders: {
      [id]: { owner: nickname ? `${name[0]}.` : name, item: ITEMS[Math.floor(draw(k, "item", 0) * ITEMS.length)], refundable: draw(k, "refund", 0) < 0.6 },
      ...(misreadExists ? { [misread]: { owner: otherName, item: ITEMS[Math.floor(draw(k, "item", 1) * ITEMS.length)], refundable: draw(k, "refund", 1) < 0.6 } } : {}),
    },
    message: hard
      ? `hi its ${name}, ordr ${id.split("").join(" ").replace("0", "O").replace("1", "l")} came broken?? refund pls`
      : `Hi, it's ${name} — order ${id} arrived broken, can I get a refund?`,
  };
}

// ---------------------------------------------------------------------------
// The agent loop. A run's state is plain data: it is the checkpoint.

function newRun(seed, params) {
  const t = task(seed, params);
  return {
    seed, params, turns: 0, tokens: 0, tool_calls: 0, misses: 0, careful: false,
    id_in_use: null, found: null, policy: null, answer: null,
    transcript: [{ role: "user", content: t.message }],
  };
}

const over = (r) => r.answer !== null || r.turns >= r.params.max_turns;

function spend(r) {
  const prompt = 150 + 30 * r.transcript.length;
  r.tokens += prompt + 40;
  r.turns += 1;
}

// The scripted model's next action, and the id it extracts for a lookup.
// key is the model's noise stream: the seed before the fork, the branch's
// noise_key after it.
function model(r, key) {
  const t = task(r.seed, r.params);
  const u = draw(key, "model", r.turns);
  const extract = () => (t.hard && !r.careful && draw(key, "misread", r.turns) < 0.7 ? t.misread : t.id);
  const last = r.transcript[r.transcript.length - 1];
  if (last.role === "tool" && last.content.startsWith("error")) return { action: last.call, id: r.id_in_use }; // retry
  if (r.found === null) {
    if (r.id_in_use === null || u < 0.5) return { action: "lookup_order", id: extract() };
    return { action: "lookup_order", id: r.id_in_use }; // stubborn retry of a miss
  }
  if (r.policy === null) {
    const mismatch = r.found.owner !== t.name;
    if (mismatch && u < 0.3) return { action: "lookup_order", id: extract() }; // notices, re-extracts
    return { action: "check_refund_policy", id: r.id_in_use };
  }
  return { action: "answer" };
}

// One turn: the model's action and, for a tool call, the tool's result.
function act(r, key, forced) {
  const t = task(r.seed, r.params);
  const { action, id } = forced ? { action: forced } : model(r, key);
  spend(r);
  if (action === "reread_message") {
    r.careful = true; r.id_in_use = null; r.found = null; r.policy = null;
    r.transcript.push({ role: "assistant", content: "Let me re-read the customer's message carefully." });
    return;
  }
  if (action === "think") {
    r.transcript.push({ role: "assistant", content: "Thinking it over." });
    return;
  }
  if (action === "answer") {
    const ok = r.found && r.id_in_use === t.id;
    r.answer = { order: r.id_in_use, refund: r.policy, correct: !!ok };
    r.transcript.push({ role: "assistant", content: `Order ${r.id_in_use}: refund ${r.policy ? "approved" : "declined"}.` });
    return;
  }
  r.transcript.push({ role: "assistant", tool_call: { name: action, id } });
  r.tool_calls += 1;
  if (draw(`env:${r.seed}`, "tool_error", r.tool_calls) < r.params.p_tool_error) {
    r.transcript.push({ role: "tool", call: action, content: "error: timeout" });
    r.id_in_use = id;
    return;
  }
  if (action === "lookup_order") {
    r.id_in_use = id;
    const o = t.orders[id];
    r.found = o ? { id, owner: o.owner, item: o.item } : null;
    if (!o) r.misses += 1;
    r.transcript.push({ role: "tool", call: action, content: o ? `found: ${o.item}, customer ${o.owner}` : "not_found" });
  } else {
    r.policy = t.orders[id] ? t.orders[id].refundable : false;
    r.transcript.push({ role: "tool", call: action, content: `refundable: ${r.policy}` });
  }
}

function features(r) {
  const t = task(r.seed, r.params);
  const last = r.transcript[r.transcript.length - 1];
  let lastTool = "none";
  if (last.role === "tool") lastTool = last.content.startsWith("error") ? "error" : last.content === "not_found" ? "not_found" : "found";
  return {
    last_tool: lastTool, misses: r.misses, name_mismatch: r.found !== null && r.found.owner !== t.name,
    turns_left: Math.max(0, r.params.max_turns - r.turns), tokens_used: r.tokens,
  };
}

const cost = (turns, tokens) => ({ steps: turns, tokens, usd: Math.round(tokens * 2) / 1e6 });

// ---------------------------------------------------------------------------
// forklab-agent/1, through the SDK (sdk/node, docs/sdk-node.md): it checks
// the declaration, the requests' params (the seed, the declared parameters
// with their defaults, the interventions) and the replies, and owns the
// JSON-RPC transport and the exact integers.

serve({
  declaration: DECLARATION,
  agent: { name: "toolbot.mjs", version: "1" },

  start({ seed, fork_steps, params }) {
    const r = newRun(seed, params);
    const t = task(seed, params);
    const forks = fork_steps.map((k) => {
      while (!over(r) && r.turns < k) act(r, `run:${r.seed}`);
      return {
        fork_step: k, over: over(r), checkpoint: structuredClone(r), features: features(r),
        hidden: { wrong_order: r.id_in_use !== null && r.id_in_use !== t.id, hard: t.hard },
        cost: cost(r.turns, r.tokens),
      };
    });
    return { task: { hard_message: t.hard, nickname: t.nickname }, forks };
  },

  branch({ checkpoint: cp, branches }) {
    if (typeof cp !== "object" || cp === null || !Array.isArray(cp.transcript) || cp.seed === undefined || typeof cp.params !== "object")
      throw new BadCheckpoint("params.checkpoint is not a toolbot checkpoint (want seed, params, transcript, …)");
    return {
      branches: branches.map((b) => {
        const r = structuredClone(cp); // the fork
        if (b.intervention) act(r, b.noise_key, b.intervention);
        while (!over(r)) act(r, b.noise_key);
        return {
          success: r.answer !== null && r.answer.correct,
          cost: cost(r.turns - cp.turns, r.tokens - cp.tokens),
          details: { answer: r.answer, turns: r.turns },
        };
      }),
    };
  },
});
