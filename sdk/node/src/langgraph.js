// @forklab/agent/langgraph: a LangGraph.js graph as a forklab agent
// (docs/agent-protocol.md, "LangGraph"; docs/sdk-node.md).
//
// Given a compiled graph with its checkpointer, the definition of a step
// (default: one run of the node START leads to, the model's turn), the
// features, and the interventions as nodes to route to, langgraph() returns
// an agent definition for serve():
//
//   start   plays a seed's input through the graph, stopping before each
//           step (interruptBefore), and at each fork step K stores
//           LangGraph's own checkpoint of the run once K steps are taken —
//           the stop before step K+1, or the run's end if it ended first
//           (over) — made canonical: the checkpoint's id and timestamp and
//           the message and tool-call ids, which change from run to run,
//           are replaced by ones numbered in order; pending writes (the
//           writes of the step after the checkpoint, which a history
//           keeps) are never stored.
//   branch  for each branch, puts the checkpoint in a fresh thread named
//           after its branch_id (or, without one, seed, fork step, arm,
//           replica and noise key) and resumes it: invoke(null) for a
//           branch without intervention; for one with, updateState(…, END)
//           cancels the pending step and invoke(Command({goto: node}))
//           routes the run to the intervention's node. A run that was over
//           at the checkpoint keeps its final success; an intervention on
//           it runs its node alone, and is charged.
//   inspect a stored checkpoint's over, features, hidden truth and cost,
//           from its state restored in a fresh thread.
//   runs    with options.recorded: the threads of a checkpointer that holds
//           recorded runs (a production SQLite or Postgres saver), sorted
//           by thread id, a page at a time (the cursor: the last thread id
//           of the page before), each with its metadata.
//   load    a recorded thread as start hands back a seed's run: its state
//           history, oldest first, read through the graph with the
//           recorded checkpointer lent to it; the checkpoint at fork step
//           K is the one a run stops at before its step K+1 (the step as
//           start counts it), or the thread's end if it ended first
//           (over); made canonical, without pending writes, its features
//           computed, as start's.
//
// The graph's own state must hold everything a branch needs — the
// environment included — since a checkpoint is all a branch gets; the
// outcome, features and costs are functions of the state.

import { fileURLToPath } from "node:url";
import { DeclarationError } from "./declaration.js";
import { AgentError, BadCheckpoint, InvalidParams, codes } from "./agent.js";
import { describe } from "./schema.js";

let lg;
try {
  lg = await import("@langchain/langgraph");
} catch (e) {
  throw new Error(
    `@forklab/agent/langgraph cannot import @langchain/langgraph from ${fileURLToPath(import.meta.url)}: ${e.message}. ` +
      "Install @langchain/langgraph beside your graph; if the SDK is a linked folder (npm install ./sdk/node links it, and Node then looks for its imports from the folder), install it as a copy: npm install --install-links ./sdk/node",
  );
}
const { Command, END, START } = lg;

/** The fixed timestamp of a canonical checkpoint. */
export const CANONICAL_TS = "1970-01-01T00:00:00.000Z";

/**
 * The id of a canonical checkpoint: a UUID (version 6, as LangGraph's own)
 * below every id LangGraph makes, so that the checkpoints a branch adds to
 * its thread sort after it.
 * @param {number} forkStep
 */
export function canonicalId(forkStep) {
  return `00000000-0000-6000-8000-${forkStep.toString(16).padStart(12, "0")}`;
}

const isLcMessage = (o) => o !== null && typeof o === "object" && o.lc === 1 && o.type === "constructor" && Array.isArray(o.id) && o.id.includes("messages") && typeof o.kwargs === "object";

/**
 * Makes a checkpoint canonical, in place: the checkpoint's id and ts, and
 * every message id and tool-call id in its channel values (LangChain's
 * serialized messages), renumbered in order of appearance: msg-1, msg-2, …
 * and call-1, call-2, …, the same id always the same number. The checkpoint
 * is the JSON form of LangGraph's own (its checkpointer's serde, "json").
 * @param {any} cp
 * @param {number} forkStep
 */
export function canonicalize(cp, forkStep) {
  cp.id = canonicalId(forkStep);
  cp.ts = CANONICAL_TS;
  const msgs = new Map();
  const calls = new Map();
  const msgId = (id) => (typeof id === "string" ? msgs.get(id) ?? (msgs.set(id, `msg-${msgs.size + 1}`), msgs.get(id)) : id);
  const callId = (id) => (typeof id === "string" ? calls.get(id) ?? (calls.set(id, `call-${calls.size + 1}`), calls.get(id)) : id);
  const renumberCalls = (list) => {
    if (Array.isArray(list)) for (const c of list) if (c && typeof c === "object" && "id" in c) c.id = callId(c.id);
  };
  const walk = (v) => {
    if (Array.isArray(v)) {
      v.forEach(walk);
      return;
    }
    if (v === null || typeof v !== "object") return;
    if (isLcMessage(v)) {
      const k = v.kwargs;
      if ("id" in k) k.id = msgId(k.id);
      if ("tool_call_id" in k) k.tool_call_id = callId(k.tool_call_id);
      renumberCalls(k.tool_calls);
      renumberCalls(k.invalid_tool_calls);
      renumberCalls(k.tool_call_chunks);
      renumberCalls(k.additional_kwargs?.tool_calls);
      return;
    }
    for (const x of Object.values(v)) walk(x);
  };
  walk(cp.channel_values);
  return cp;
}

const isObject = (v) => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * A LangGraph graph as an agent definition for serve().
 * @param {import("./langgraph.js").LangGraphOptions} o
 * @returns {import("./index.js").AgentDefinition}
 */
export function langgraph(o) {
  if (!isObject(o)) throw new DeclarationError(`langgraph(options): options must be an object, got ${describe(o)}`);
  const { graph, declaration: decl } = o;
  if (!graph || typeof graph.invoke !== "function" || typeof graph.getState !== "function" || typeof graph.updateState !== "function" || !isObject(graph.nodes))
    throw new DeclarationError("langgraph options.graph must be a compiled LangGraph graph (graph.compile({ checkpointer }))");
  const saver = o.checkpointer ?? graph.checkpointer;
  if (!saver || typeof saver.put !== "function" || typeof saver.getTuple !== "function" || !saver.serde)
    throw new DeclarationError("langgraph options.checkpointer: the graph has no checkpointer: compile it with one (graph.compile({ checkpointer: new MemorySaver() })) or give options.checkpointer");
  for (const f of ["input", "features", "cost", "success"]) if (typeof o[f] !== "function") throw new DeclarationError(`langgraph options.${f} must be a function, got ${describe(o[f])}`);
  for (const f of ["task", "hidden", "details", "canonical"]) if (o[f] !== undefined && typeof o[f] !== "function") throw new DeclarationError(`langgraph options.${f} must be a function when given, got ${describe(o[f])}`);
  const nodes = Object.keys(graph.nodes).filter((n) => n !== START);
  const steps = o.step === undefined ? [entryNode(graph)] : [o.step].flat();
  for (const s of steps) if (!nodes.includes(s)) throw new DeclarationError(`langgraph options.step: ${JSON.stringify(s)} is not a node of the graph (${nodes.join(", ")})`);
  const route = { ...(o.interventions ?? {}) };
  for (const [i, iv] of (decl?.interventions ?? []).entries()) {
    route[iv.action] ??= iv.action;
    if (!nodes.includes(route[iv.action]))
      throw new DeclarationError(`langgraph: declaration.interventions[${i}] (arm ${iv.arm}) applies ${JSON.stringify(iv.action)}, routed to node ${JSON.stringify(route[iv.action])}, which is not a node of the graph (${nodes.join(", ")}); map the action to its node in options.interventions`);
  }
  // In-memory threads are dropped once read: a sweep would otherwise keep
  // every branch of every seed in the process.
  const keep = o.keepThreads ?? saver.constructor?.name !== "MemorySaver";
  const limit = o.recursionLimit === undefined ? {} : { recursionLimit: o.recursionLimit };
  const rec = recordedOptions(o.recorded, saver);
  const dropThread = async (id) => {
    if (typeof saver.deleteThread === "function") await saver.deleteThread(id);
  };

  // Plays the graph on until it ends or stops before a step; resumes past
  // breakpoints compiled into the graph. Returns the state there.
  async function playOn(config, input, until) {
    let state;
    for (let i = 0; ; i++) {
      await graph.invoke(input, until ? { ...config, interruptBefore: until } : config);
      state = await graph.getState(config);
      if (state.next.length === 0 || (until && state.next.some((n) => until.includes(n)))) return state;
      const asked = state.tasks?.flatMap((t) => t.interrupts ?? []) ?? [];
      if (asked.length) throw new AgentError(codes.INTERNAL_ERROR, `the graph called interrupt() in ${state.next.join(", ")}: the adapter plays runs without a human to answer it`, { retryable: false });
      if (i > 10000) throw new AgentError(codes.INTERNAL_ERROR, `the graph keeps stopping before ${state.next.join(", ")}`, { retryable: false });
      input = null;
    }
  }

  // The fork entry of start's result at a state of the run.
  async function fork(k, state, over, threadConfig, store = saver) {
    const tuple = await store.getTuple(state.config ?? threadConfig);
    const [kind, bytes] = await store.serde.dumpsTyped(tuple.checkpoint);
    if (kind !== "json") throw new AgentError(codes.INTERNAL_ERROR, `the checkpointer's serde writes ${kind}, not json: the adapter stores checkpoints as JSON`, { retryable: false });
    const cp = canonicalize(JSON.parse(typeof bytes === "string" ? bytes : new TextDecoder().decode(bytes)), k);
    if (o.canonical) o.canonical(cp);
    const v = state.values;
    return { fork_step: k, over, checkpoint: { langgraph: cp, step: tuple.metadata?.step ?? 0 }, features: o.features(v), hidden: o.hidden ? o.hidden(v) : {}, cost: o.cost(v) };
  }

  async function start({ seed, fork_steps, params, model }) {
    const thread = `forklab/start/${seed}`;
    const config = { ...limit, configurable: { thread_id: thread, forklab: { seed, noise: `seed:${seed}`, params, model } } };
    await dropThread(thread);
    const wanted = [...new Set(fork_steps)].sort((a, b) => a - b);
    const at = new Map();
    let state = await playOn(config, await o.input({ seed, params, model }), steps);
    const task = o.task ? o.task(state.values) : {};
    // state is the stop before step taken+1, or the run's end (over).
    for (let taken = 0; ; taken++) {
      const over = state.next.length === 0;
      for (const k of wanted) if (!at.has(k) && (k === taken || (over && k >= taken))) at.set(k, await fork(k, state, over, config));
      if (at.size === wanted.length) break;
      if (over) throw new AgentError(codes.INTERNAL_ERROR, "the run ended without reaching every fork step", { retryable: false });
      state = await playOn(config, null, steps);
    }
    if (!keep) await dropThread(thread);
    return { task, forks: fork_steps.map((k) => at.get(k)) };
  }

  function checkCheckpoint(cp) {
    if (!isObject(cp) || !isObject(cp.langgraph) || !isObject(cp.langgraph.channel_values) || !Number.isInteger(cp.step))
      throw new BadCheckpoint("params.checkpoint is not a LangGraph checkpoint of @forklab/agent/langgraph (want {langgraph: {channel_values, …}, step})");
  }

  // Puts a stored checkpoint in a fresh thread of the adapter's
  // checkpointer and returns its state there.
  async function restore(config, cp, text = JSON.stringify(cp.langgraph)) {
    await dropThread(config.configurable.thread_id);
    await saver.put(config, await saver.serde.loadsTyped("json", text), { source: "fork", step: cp.step, parents: {} }, {});
    return graph.getState(config);
  }

  // What a stored checkpoint is (a file's record without its features):
  // its state restored, over when nothing is next.
  async function inspect({ checkpoint: cp }) {
    checkCheckpoint(cp);
    const config = { ...limit, configurable: { thread_id: "forklab/inspect", checkpoint_ns: "" } };
    const state = await restore(config, cp);
    await dropThread(config.configurable.thread_id);
    const v = state.values;
    return { over: state.next.length === 0, features: o.features(v), hidden: o.hidden ? o.hidden(v) : {}, cost: o.cost(v) };
  }

  async function branch({ seed, fork_step, checkpoint, branches }) {
    const cp = checkpoint;
    checkCheckpoint(cp);
    // Each branch gets its own copy, revived by the checkpointer's serde.
    const text = JSON.stringify(cp.langgraph);
    const out = [];
    for (const [i, b] of branches.entries()) {
      const node = b.intervention === null ? null : route[b.intervention];
      if (b.intervention !== null && node === undefined) throw new InvalidParams(`params.branches[${i}].intervention: no node for ${JSON.stringify(b.intervention)}`);
      const thread = b.branch_id ?? `forklab/${seed}/${fork_step}/${b.arm}/${b.replica}/${b.noise_key}`;
      const forklab = { seed, fork_step, arm: b.arm, replica: b.replica, noise_key: b.noise_key, noise: b.noise_key, branch_id: b.branch_id ?? null };
      const config = { ...limit, configurable: { thread_id: thread, checkpoint_ns: "", forklab } };
      const atFork = await restore(config, cp, text);
      const over = atFork.next.length === 0;
      let end = atFork;
      if (node !== null) {
        await graph.updateState(config, null, END);
        const go = new Command({ goto: node });
        if (over) {
          // The run is over: the intervention's node runs alone, and is charged.
          await graph.invoke(go, { ...config, interruptAfter: [node] });
          end = await graph.getState(config);
        } else {
          end = await playOn(config, go, null);
        }
      } else if (!over) {
        end = await playOn(config, null, null);
      }
      const success = o.success(over ? atFork.values : end.values);
      const details = o.details ? o.details(end.values) : undefined;
      out.push({
        success,
        cost: costBetween(o.cost(atFork.values), o.cost(end.values)),
        details: { thread_id: thread, ...(isObject(details) ? details : details === undefined ? {} : { value: details }) },
      });
      if (!keep) await dropThread(thread);
    }
    return { branches: out };
  }

  // The recorded threads, sorted by thread id, each {thread_id, metadata}.
  async function threads() {
    const list = [];
    if (rec.threads) {
      for await (const t of await rec.threads()) list.push(typeof t === "string" ? { thread_id: t } : t);
    } else {
      const seen = new Map(); // thread id → its oldest checkpoint's metadata
      for await (const t of rec.checkpointer.list({})) {
        const c = t.config?.configurable ?? {};
        if ((c.checkpoint_ns ?? "") === "" && typeof c.thread_id === "string" && !c.thread_id.startsWith("forklab/")) seen.set(c.thread_id, t.metadata);
      }
      for (const [thread_id, meta] of seen) list.push({ thread_id, metadata: rec.metadata ? await rec.metadata(thread_id, meta) : userMetadata(meta) });
    }
    for (const [i, t] of list.entries())
      if (!isObject(t) || typeof t.thread_id !== "string" || t.thread_id === "") throw new AgentError(codes.INTERNAL_ERROR, `langgraph options.recorded.threads: entry ${i} is ${describe(t)}, not a thread id or {thread_id, metadata}`, { retryable: false });
    return list.sort((a, b) => (a.thread_id < b.thread_id ? -1 : a.thread_id > b.thread_id ? 1 : 0));
  }

  async function runs({ cursor, limit }) {
    const all = await threads();
    const from = cursor === null ? 0 : all.findIndex((t) => t.thread_id > cursor);
    const page = from < 0 ? [] : all.slice(from, from + limit);
    const more = from >= 0 && from + page.length < all.length;
    return {
      runs: page.map((t) => (t.metadata === undefined ? { run_id: t.thread_id } : { run_id: t.thread_id, metadata: t.metadata })),
      next_cursor: more ? page.at(-1).thread_id : null,
    };
  }

  async function load({ run_id, fork_steps }) {
    // The recorded checkpointer lent to the graph, as a parent graph lends
    // its own to a subgraph: the history is read as LangGraph reads it.
    const config = { configurable: { thread_id: run_id, checkpoint_ns: "", [LENT_CHECKPOINTER]: rec.checkpointer } };
    const history = [];
    for await (const s of graph.getStateHistory(config)) history.push(s);
    history.reverse();
    if (history.length === 0) throw new InvalidParams(`params.run_id: the recorded checkpointer holds no thread ${JSON.stringify(run_id)}`);
    const wanted = [...new Set(fork_steps)].sort((a, b) => a - b);
    const at = new Map();
    let task;
    let taken = 0; // steps taken before the snapshot
    let reached = 0; // steps taken at the last stop or end
    let lastStop; // the LangGraph step (superstep) of the last stop counted
    for (const s of history) {
      const over = s.next.length === 0;
      const stop = s.next.some((n) => steps.includes(n));
      if (!over && !stop) continue;
      // A run resumed at a stop may write the same stop twice: one step.
      if (stop && lastStop !== undefined && s.metadata?.step === lastStop) continue;
      task ??= o.task ? o.task(s.values) : {};
      reached = taken;
      for (const k of wanted) if (!at.has(k) && (k === taken || (over && k >= taken))) at.set(k, await fork(k, s, over, config, rec.checkpointer));
      if (over) break;
      lastStop = s.metadata?.step;
      taken++;
    }
    const missing = wanted.filter((k) => !at.has(k));
    if (missing.length)
      throw new InvalidParams(`thread ${JSON.stringify(run_id)} has taken ${reached} step${reached === 1 ? "" : "s"} and is not over: it has no checkpoint at fork step ${missing.join(", ")}`);
    return { task, forks: fork_steps.map((k) => at.get(k)) };
  }

  const recordedMethods = rec.checkpointer ? { runs, load } : {};
  return { declaration: decl, agent: o.agent, batch: o.batch, start, branch, inspect, ...recordedMethods };
}

// LangGraph's configurable key through which a graph is lent a checkpointer
// (CONFIG_KEY_CHECKPOINTER; not exported by @langchain/langgraph).
const LENT_CHECKPOINTER = "__pregel_checkpointer";

// The keys LangGraph writes in a checkpoint's metadata itself; the rest is
// what the run's config.metadata added (a user, a ticket, a day).
const ownMetadata = new Set(["source", "step", "parents", "writes", "thread_id", "checkpoint_ns", "checkpoint_id"]);
function userMetadata(meta) {
  if (!isObject(meta)) return undefined;
  const out = Object.fromEntries(Object.entries(meta).filter(([k]) => !ownMetadata.has(k)));
  return Object.keys(out).length ? out : undefined;
}

function recordedOptions(r, saver) {
  if (r === undefined) return {};
  if (r === true) r = {};
  if (!isObject(r)) throw new DeclarationError(`langgraph options.recorded must be an object {checkpointer, threads, metadata} when given, got ${describe(r)}`);
  const checkpointer = r.checkpointer ?? saver;
  if (!checkpointer || typeof checkpointer.list !== "function" || typeof checkpointer.getTuple !== "function" || !checkpointer.serde)
    throw new DeclarationError("langgraph options.recorded.checkpointer must be a LangGraph checkpointer (a BaseCheckpointSaver: list, getTuple, serde)");
  for (const f of ["threads", "metadata"]) if (r[f] !== undefined && typeof r[f] !== "function") throw new DeclarationError(`langgraph options.recorded.${f} must be a function when given, got ${describe(r[f])}`);
  return { checkpointer, threads: r.threads, metadata: r.metadata };
}

// The node START's one edge leads to: a ReAct graph's model node.
function entryNode(graph) {
  const edges = [...(graph.builder?.edges ?? [])].filter(([from]) => from === START).map(([, to]) => to);
  if (edges.length !== 1) throw new DeclarationError(`langgraph options.step: the graph's START leads to ${edges.length ? edges.join(", ") : "no node by a plain edge"}: name the node whose runs are steps (a model turn), e.g. step: "agent"`);
  return edges[0];
}

// A cost from the fork to the end: the difference of two cumulative costs,
// each field at least 0, fractional fields rounded to 12 significant digits
// (0.00154 - 0.0006 is 0.00094, not 0.0009399999999999999).
function costBetween(a, b) {
  const out = {};
  for (const [k, v] of Object.entries(b)) {
    const d = v - (a[k] ?? 0);
    out[k] = Number.isInteger(v) && Number.isInteger(a[k] ?? 0) ? Math.max(0, d) : Math.max(0, Number(d.toPrecision(12)));
  }
  return out;
}
