// An agent of forklab-agent/1 (docs/agent-protocol.md): a declaration and
// the functions start, branch and, optionally, fold. createAgent checks the
// definition and answers requests; serve speaks the protocol on stdin and
// stdout.
//
// What the SDK owns, so that an agent does not repeat it: JSON-RPC 2.0 (ids,
// batches, error codes), initialize and shutdown, exact integers (seeds
// beyond 2^53 as BigInts), stdout kept for replies (console.log goes to
// stderr), the check of the declaration before any seed runs, the check of
// each request's params (-32602 naming the field) and of each reply against
// the protocol's schemas and the declaration (the method and field named).
// The recorded-run methods are first-class: runs and load (given together,
// they declare capabilities.runs) and inspect (capabilities.inspect), their
// params and replies checked as start's are. Any further method goes
// through the same dispatch: its params and result are checked against
// METHOD.params and METHOD.result in the bundled schemas when they exist.

import { basename } from "node:path";
import { createInterface } from "node:readline";
import { guardStdout, writeReply } from "./stdout.js";
import { parseLine, stringifyLine } from "./json.js";
import { hasSchema, validate, schema, describe, short } from "./schema.js";
import { DeclarationError, checkDeclaration, valuesError, costError, readParams } from "./declaration.js";

/** The protocol version this SDK speaks. */
export const PROTOCOL = "forklab-agent/1";

/** JSON-RPC 2.0 and forklab-agent/1 error codes (docs/agent-protocol.md, "Errors"). */
export const codes = Object.freeze({
  PARSE_ERROR: -32700,
  INVALID_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  INTERNAL_ERROR: -32603,
  RUN_FAILED: -32000,
  BAD_CHECKPOINT: -32001,
  UNSUPPORTED_VERSION: -32002,
});

/** An error reply: throw it from start, branch, fold or a method. */
export class AgentError extends Error {
  /**
   * @param {number} code a JSON-RPC error code (codes)
   * @param {string} message
   * @param {unknown} [data] sent as the error's data; {"retryable": false} stops forklab retrying
   */
  constructor(code, message, data) {
    super(message);
    this.name = "AgentError";
    this.code = code;
    this.data = data;
  }
}

/** -32602: a missing or mistyped param, an undeclared intervention, events that cannot be folded. Not retried. */
export class InvalidParams extends AgentError {
  constructor(message, data) {
    super(codes.INVALID_PARAMS, message, data);
    this.name = "InvalidParams";
  }
}

/** -32001: the checkpoint is not one this agent (version) wrote. Not retried. */
export class BadCheckpoint extends AgentError {
  constructor(message, data) {
    super(codes.BAD_CHECKPOINT, message, data);
    this.name = "BadCheckpoint";
  }
}

/** -32000: the run failed in a way worth retrying (a model API error, a tool timeout). Retried. */
export class RunFailed extends AgentError {
  constructor(message, data) {
    super(codes.RUN_FAILED, message, data);
    this.name = "RunFailed";
  }
}

const isObject = (v) => typeof v === "object" && v !== null && !Array.isArray(v);
const validId = (id) => (typeof id === "number" && Number.isInteger(id)) || typeof id === "string";
const builtin = new Set(["initialize", "start", "branch", "fold", "shutdown", "runs", "load", "inspect"]);

/**
 * Checks an agent's definition and returns its request handler. Throws
 * DeclarationError naming the field when the definition or its declaration
 * is malformed: before any seed runs.
 * @param {import("./index.js").AgentDefinition} def
 */
export function createAgent(def) {
  if (!isObject(def)) throw new DeclarationError(`the agent definition must be an object {declaration, start, branch}, got ${describe(def)}`);
  for (const f of ["start", "branch"]) if (typeof def[f] !== "function") throw new DeclarationError(`definition.${f} must be a function, got ${describe(def[f])}`);
  for (const f of ["fold", "runs", "load", "inspect"]) if (def[f] !== undefined && typeof def[f] !== "function") throw new DeclarationError(`definition.${f} must be a function when given, got ${describe(def[f])}`);
  if ((def.runs === undefined) !== (def.load === undefined))
    throw new DeclarationError(`definition.${def.runs ? "load" : "runs"} is missing: runs lists the recorded runs and load hands one back, so an agent gives both or neither`);
  checkDeclaration(def.declaration);
  const decl = def.declaration;
  const extra = def.methods ?? {};
  if (!isObject(extra)) throw new DeclarationError(`definition.methods must be an object of functions, got ${describe(extra)}`);
  for (const [m, f] of Object.entries(extra)) {
    if (builtin.has(m)) throw new DeclarationError(`definition.methods.${m}: ${m} is a built-in method: give it as definition.${m}`);
    if (typeof f !== "function") throw new DeclarationError(`definition.methods.${m} must be a function, got ${describe(f)}`);
  }
  const capabilities = { ...(def.capabilities ?? {}) };
  if (def.fold) capabilities.fold = true;
  if (def.runs) capabilities.runs = true;
  if (def.inspect) capabilities.inspect = true;
  if (def.batch !== undefined) capabilities.batch = def.batch;
  const agentInfo = def.agent ?? { name: basename(process.argv[1] ?? "agent"), version: decl.version };
  const initResult = { protocol_version: PROTOCOL, agent: agentInfo, world: decl, capabilities };
  {
    // The whole initialize reply, once: capabilities and agent checked here.
    const known = "volatile" in (schema("declaration").properties ?? {});
    const { volatile, ...plain } = decl;
    const e = validate("initialize.result", { ...initResult, world: known ? decl : plain }, "initialize result");
    if (e) throw new DeclarationError(e.replace(/^initialize result\.world/, "declaration").replace(/^initialize result\.capabilities/, "definition.capabilities").replace(/^initialize result\.agent/, "definition.agent"));
  }
  const interventions = new Set((decl.interventions ?? []).map((iv) => iv.action));
  const costFields = decl.cost.fields;
  let closed = false; // shutdown answered

  // Each method: a check of its params beyond the schema, the handler, a
  // check of its result beyond the schema.
  const methods = {
    initialize: {
      run(p) {
        if (!Array.isArray(p.protocol_versions) || !p.protocol_versions.includes(PROTOCOL))
          throw new AgentError(codes.UNSUPPORTED_VERSION, `this agent speaks ${PROTOCOL} only`, { supported: [PROTOCOL] });
        return initResult;
      },
      resultChecked: true, // once, when the definition was checked
    },
    start: {
      params(p) {
        const [params, e] = readParams(decl.params ?? [], p.params);
        if (e) throw new InvalidParams(e);
        return { ...p, params };
      },
      run: (p) => def.start(p),
      result(r, p) {
        if (r.forks.length !== p.fork_steps.length) return `result.forks holds ${r.forks.length} forks for ${p.fork_steps.length} fork steps asked (${p.fork_steps.join(", ")})`;
        for (const [i, f] of r.forks.entries()) {
          if (f.fork_step !== p.fork_steps[i]) return `result.forks[${i}].fork_step is ${f.fork_step}, but the fork step asked there is ${p.fork_steps[i]}`;
        }
        return valuesError("task fields", decl.task ?? [], r.task, "result.task") ?? forkError(r.forks);
      },
    },
    branch: {
      params(p) {
        for (const [i, b] of p.branches.entries()) {
          if (b.intervention !== null && !interventions.has(b.intervention))
            throw new InvalidParams(`params.branches[${i}].intervention: ${short(b.intervention)} is not a declared intervention (${[...interventions].join(", ") || "the agent declares none"})`);
        }
        return p;
      },
      run: (p) => def.branch(p),
      result(r, p) {
        if (r.branches.length !== p.branches.length) return `result.branches holds ${r.branches.length} outcomes for ${p.branches.length} branches asked`;
        for (const [i, b] of r.branches.entries()) {
          if (b.error === undefined) {
            const e = costError(costFields, b.cost, `result.branches[${i}].cost`);
            if (e) return e;
          }
        }
        return null;
      },
    },
    shutdown: {
      async run() {
        if (def.shutdown) await def.shutdown();
        closed = true;
        return {};
      },
    },
  };
  if (def.fold) {
    methods.fold = {
      run: (p) => def.fold(p),
      result: (r) => forkError([r], "result"),
    };
  }
  if (def.runs) {
    methods.runs = {
      run: (p) => def.runs(p),
      result(r) {
        const seen = new Set();
        for (const [i, run] of r.runs.entries()) {
          if (seen.has(run.run_id)) return `result.runs[${i}].run_id ${JSON.stringify(run.run_id)} is listed twice in one page`;
          seen.add(run.run_id);
        }
        return null;
      },
    };
    // load answers exactly as start does: its params' defaults filled in,
    // one fork per step asked, in order, checked against the declaration.
    methods.load = { params: methods.start.params, run: (p) => def.load(p), result: methods.start.result };
  }
  if (def.inspect) {
    methods.inspect = { run: (p) => def.inspect(p), result: (r) => forkError([r], "result") };
  }
  for (const [m, f] of Object.entries(extra)) methods[m] = { run: (p) => f(p) };

  function forkError(forks, at) {
    for (const [i, f] of forks.entries()) {
      const place = at ?? `result.forks[${i}]`;
      const e = valuesError("features", decl.features, f.features, `${place}.features`) ??
        valuesError("hidden fields", decl.hidden ?? [], f.hidden, `${place}.hidden`) ??
        costError(costFields, f.cost, `${place}.cost`);
      if (e) return e;
    }
    return null;
  }

  /**
   * Answers one request object; null for a notification (no reply).
   * @param {unknown} req
   * @returns {Promise<object | null>}
   */
  async function handle(req) {
    if (!isObject(req) || req.jsonrpc !== "2.0" || typeof req.method !== "string" || (req.id !== undefined && !validId(req.id)))
      return reply(validId(req?.id) ? req.id : null, new AgentError(codes.INVALID_REQUEST, "not a JSON-RPC 2.0 request: want an object with \"jsonrpc\": \"2.0\", a method and an id"));
    if (req.id === undefined) {
      // A notification: JSON-RPC 2.0 answers none (forklab sends none).
      log(`ignored the notification ${short(req.method)}: forklab-agent/1 has none`);
      return null;
    }
    const m = Object.hasOwn(methods, req.method) ? methods[req.method] : null;
    if (!m) {
      const why = ["fold", "runs", "load", "inspect"].includes(req.method)
        ? `this agent does not declare ${req.method} (give definition.${req.method}${req.method === "runs" ? " and definition.load" : req.method === "load" ? " and definition.runs" : ""})`
        : `method ${JSON.stringify(req.method)} not found`;
      return reply(req.id, new AgentError(codes.METHOD_NOT_FOUND, why));
    }
    try {
      let params = req.params ?? {};
      if (!isObject(params)) throw new InvalidParams(`${req.method}: params must be an object, got ${describe(params)}`);
      if (hasSchema(`${req.method}.params`)) {
        const e = validate(`${req.method}.params`, params, "params");
        if (e) throw new InvalidParams(`${req.method}: ${e}`);
      }
      if (m.params) params = m.params(params);
      const result = await m.run(params);
      if (!m.resultChecked) {
        const e = (hasSchema(`${req.method}.result`) ? validate(`${req.method}.result`, result, "result") : null) ?? (m.result ? m.result(result, params) : null);
        if (e) {
          const msg = `the agent's ${req.method} reply breaks forklab-agent/1: ${e}`;
          log(msg);
          throw new AgentError(codes.INTERNAL_ERROR, msg, { retryable: false });
        }
      }
      return { jsonrpc: "2.0", id: req.id, result };
    } catch (e) {
      if (!(e instanceof AgentError)) {
        log(`${req.method} failed: ${e?.stack ?? e}`);
        return reply(req.id, new AgentError(codes.INTERNAL_ERROR, `${req.method}: ${e?.message ?? e}`));
      }
      return reply(req.id, e);
    }
  }

  /**
   * Answers one line: a request or a batch. Returns the reply line (no
   * newline), or null when nothing is to be written.
   * @param {string} line
   * @returns {Promise<string | null>}
   */
  async function handleLine(line) {
    let msg;
    try {
      msg = parseLine(line);
    } catch (e) {
      return stringifyLine(reply(null, new AgentError(codes.PARSE_ERROR, `not JSON: ${e.message}`)));
    }
    if (Array.isArray(msg)) {
      if (msg.length === 0) return stringifyLine(reply(null, new AgentError(codes.INVALID_REQUEST, "an empty batch")));
      const out = [];
      for (const r of msg) {
        const a = await handle(r);
        if (a) out.push(a);
      }
      return out.length ? encode(out) : null;
    }
    const a = await handle(msg);
    return a && encode(a);
  }

  // A reply that cannot be written as JSON (a cycle, say) is the agent's
  // bug: the request gets an internal error instead of a broken line.
  function encode(value) {
    try {
      return stringifyLine(value);
    } catch (e) {
      const fix = (r) => (r.result === undefined ? r : reply(r.id, new AgentError(codes.INTERNAL_ERROR, `the reply cannot be written as JSON: ${e.message}`, { retryable: false })));
      return stringifyLine(Array.isArray(value) ? value.map(fix) : fix(value));
    }
  }

  return {
    declaration: decl,
    initializeResult: initResult,
    handle,
    handleLine,
    /** Whether a shutdown request has been answered: the process should exit. */
    get closed() {
      return closed;
    },
  };
}

function reply(id, e) {
  const error = { code: e.code, message: e.message };
  if (e.data !== undefined) error.data = e.data;
  return { jsonrpc: "2.0", id, error };
}

const logPrefix = basename(process.argv[1] ?? "agent");
function log(msg) {
  process.stderr.write(`${logPrefix}: ${msg}\n`);
}

/**
 * Serves forklab-agent/1 on stdin and stdout until the end of stdin or a
 * shutdown request, then exits the process. Before reading anything it
 * checks the definition: a malformed declaration is printed on stderr,
 * naming the field, and the process exits with status 2. stdout carries
 * replies only: anything else written to process.stdout (console.log
 * included) goes to stderr, from the moment the SDK is imported.
 * @param {import("./index.js").AgentDefinition} def
 * @returns {Promise<void>}
 */
export async function serve(def) {
  let agent;
  try {
    agent = createAgent(def);
  } catch (e) {
    if (!(e instanceof DeclarationError)) throw e;
    process.stderr.write(`${logPrefix}: the agent's definition is malformed: ${e.message}\n`);
    process.exit(2);
  }
  guardStdout();
  const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const raw of rl) {
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (!line.trim()) continue;
    const answer = await agent.handleLine(line);
    if (answer !== null) await writeReply(answer);
    if (agent.closed) break;
  }
  process.exit(0);
}
