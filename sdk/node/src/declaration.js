// The world declaration (docs/agent-protocol.md, "The world declaration"):
// its rules beyond the schema, the check of declared values (task draws,
// features, hidden truth, costs) and of a start's parameters, and the
// `volatile` paths of start's result that agent check's repeatability
// comparison ignores.

import { schema, validate, describe, short } from "./schema.js";

/** Thrown by createAgent for a definition or declaration it refuses; the message names the field. */
export class DeclarationError extends Error {
  constructor(message) {
    super(message);
    this.name = "DeclarationError";
  }
}

const MAX_EXACT = 2 ** 53;
const COST_FIELDS = ["steps", "tokens", "usd", "seconds"];
const INT_COSTS = new Set(["steps", "tokens"]);

// A volatile path: keys joined by ".", each key a name or "*" (any key),
// followed by any number of array indices "[N]" or "[*]".
const volatileSegment = /^(?:\*|[^.[\]*]+)(?:\[(?:\d+|\*)\])*$/;

/**
 * Checks a `volatile` list and returns the first problem, or null.
 * @param {unknown} v
 * @returns {string | null}
 */
export function checkVolatile(v) {
  if (!Array.isArray(v)) return `declaration.volatile: must be an array of paths such as "forks[*].checkpoint.ts", got ${describe(v)}`;
  for (const [i, p] of v.entries()) {
    const at = `declaration.volatile[${i}]`;
    if (typeof p !== "string" || p === "") return `${at}: must be a non-empty string, got ${short(p)}`;
    const segs = p.split(".");
    const bad = segs.findIndex((s) => !volatileSegment.test(s));
    if (bad >= 0)
      return `${at}: ${JSON.stringify(p)}: ${JSON.stringify(segs[bad])} is not a key ("name" or "*") followed by indices ("[2]" or "[*]"); write keys joined by ".", e.g. "forks[*].checkpoint.ts"`;
    const first = segs[0].replace(/\[.*$/, "");
    if (!["forks", "task", "*"].includes(first))
      return `${at}: ${JSON.stringify(p)} matches nothing: a path starts at start's result, whose keys are task and forks (e.g. "forks[*].checkpoint.ts")`;
  }
  return null;
}

/**
 * Validates a declaration: the volatile paths, the schema (the bundled
 * copy of declaration.schema.json), then the rules forklab applies beyond
 * it. Throws DeclarationError naming the field. forklab itself also checks
 * the names against its tables' fixed columns (seed, arm, label, …).
 * @param {any} d
 */
export function checkDeclaration(d) {
  if (typeof d !== "object" || d === null || Array.isArray(d)) throw new DeclarationError(`declaration: must be an object (the world declaration), got ${describe(d)}`);
  let plain = d;
  if (d.volatile !== undefined) {
    const e = checkVolatile(d.volatile);
    if (e) throw new DeclarationError(e);
    // A copy of the schemas from before `volatile` joined the protocol does
    // not list it: the paths were checked above.
    if (!("volatile" in (schema("declaration").properties ?? {}))) {
      const { volatile, ...rest } = d;
      plain = rest;
    }
  }
  const e = validate("declaration", plain, "declaration");
  if (e) throw new DeclarationError(e);
  const fail = (at, msg) => {
    throw new DeclarationError(`declaration${at}: ${msg}`);
  };
  const fieldGroups = [["task", d.task ?? []], ["features", d.features], ["hidden", d.hidden ?? []]];
  for (const [group, fields] of fieldGroups) {
    const seen = new Map();
    fields.forEach((f, i) => {
      const at = `.${group}[${i}]`;
      if (seen.has(f.name)) fail(at, `${JSON.stringify(f.name)} is repeated (${group}[${seen.get(f.name)}] has it)`);
      seen.set(f.name, i);
      if ((f.type === "enum") !== (f.values !== undefined)) fail(at, f.type === "enum" ? "an enum lists its values" : "only an enum lists values");
      if (group !== "hidden" && f.name.startsWith("hidden_")) fail(`${at}.name`, "the hidden_ prefix is for hidden truth");
      if (group !== "hidden" && /^(cost|extra)_/.test(f.name)) fail(`${at}.name`, "the cost_ and extra_ prefixes are for the fixed cost columns");
    });
  }
  // Features, hidden_ columns and parameters name columns of one table.
  const columns = new Map();
  const claim = (col, at) => {
    if (columns.has(col)) fail(at, `${JSON.stringify(col)} is already ${columns.get(col)}`);
    columns.set(col, at.slice(1));
  };
  d.features.forEach((f, i) => claim(f.name, `.features[${i}].name`));
  (d.hidden ?? []).forEach((f, i) => claim(`hidden_${f.name}`, `.hidden[${i}].name`));
  (d.params ?? []).forEach((p, i) => {
    const at = `.params[${i}]`;
    if ((p.type === "enum") !== (p.values !== undefined)) fail(at, p.type === "enum" ? "an enum lists its values" : "only an enum lists values");
    if (/^(cost|extra)_/.test(p.name)) fail(`${at}.name`, "the cost_ and extra_ prefixes are for the fixed cost columns");
    claim(p.name, `${at}.name`);
    const err = paramError(p, p.default);
    if (err) fail(`${at}.default`, err);
  });
  const features = new Set(d.features.map((f) => f.name));
  (d.task ?? []).forEach((t, i) => {
    if (features.has(t.name)) fail(`.task[${i}].name`, `${JSON.stringify(t.name)} is already a feature's name`);
  });
  if (d.fault_flag !== undefined && !(d.hidden ?? []).some((h) => h.name === d.fault_flag && h.type === "bool"))
    fail(".fault_flag", `${JSON.stringify(d.fault_flag)} must name a bool hidden field`);
  if (d.actions !== undefined) {
    if (d.actions[0] !== "no_tool") fail(".actions[0]", `must be "no_tool" (a model turn without a tool call), got ${short(d.actions[0])}`);
    if (d.actions.length > 255) fail(".actions", `${d.actions.length} actions, more than 255`);
  }
  const arms = new Set();
  (d.interventions ?? []).forEach((iv, i) => {
    const at = `.interventions[${i}]`;
    if (arms.has(iv.arm)) fail(`${at}.arm`, `arm ${iv.arm} has two interventions`);
    arms.add(iv.arm);
    if (d.actions !== undefined && !d.actions.includes(iv.action)) fail(`${at}.action`, `${JSON.stringify(iv.action)} is not among the actions (${d.actions.join(", ")})`);
  });
  if (!d.cost.fields.includes("steps")) fail(".cost.fields", 'must include "steps"');
  const order = d.cost.fields.map((f) => COST_FIELDS.indexOf(f));
  if (order.some((x, i) => i > 0 && x < order[i - 1])) fail(".cost.fields", `must be in the order ${COST_FIELDS.join(", ")}`);
}

/**
 * Checks one declared value group (task, features, hidden) of a reply.
 * Returns the first problem, naming the place (at), or null.
 * @param {string} group "task", "features" or "hidden"
 * @param {Array<{name: string, type: string, values?: string[], nullable?: boolean}>} fields
 * @param {unknown} obj
 * @param {string} at e.g. "result.forks[0].features"
 */
export function valuesError(group, fields, obj, at) {
  if (typeof obj !== "object" || obj === null || Array.isArray(obj)) return `${at} must be an object of the declared ${group}, got ${describe(obj)}`;
  for (const f of fields) {
    const v = obj[f.name];
    const place = `${at}.${f.name}`;
    if (v === undefined) return `${place} is missing: the declaration lists it (${f.type})`;
    if (v === null) {
      if (f.nullable) continue;
      return `${place} is null, but the declaration does not make it nullable`;
    }
    const e = fieldError(f, v);
    if (e) return `${place} ${e}`;
  }
  for (const k of Object.keys(obj)) {
    if (obj[k] !== undefined && !fields.some((f) => f.name === k))
      return `${at}.${k} is not declared: the declaration's ${group} are ${fields.length ? fields.map((f) => f.name).join(", ") : "none"}`;
  }
  return null;
}

function fieldError(f, v) {
  switch (f.type) {
    case "bool":
      return typeof v === "boolean" ? null : `must be a bool, got ${describe(v)}`;
    case "int":
      if (typeof v !== "number" || !Number.isInteger(v)) return `must be an integer, got ${describe(v)}${typeof v === "number" ? ` (${v})` : ""}`;
      return Math.abs(v) <= MAX_EXACT ? null : `must be an integer within ±2^53, got ${v}`;
    case "float":
      return typeof v === "number" && Number.isFinite(v) ? null : `must be a finite number, got ${describe(v)}`;
    case "enum":
      return typeof v === "string" && f.values.includes(v) ? null : `must be one of ${f.values.join(", ")}, got ${short(v)}`;
  }
  return `has an unknown type ${f.type}`;
}

/**
 * Checks a cost against the declared cost fields.
 * @param {string[]} fields
 * @param {unknown} cost
 * @param {string} at
 */
export function costError(fields, cost, at) {
  if (typeof cost !== "object" || cost === null || Array.isArray(cost)) return `${at} must be an object of the declared cost fields (${fields.join(", ")}), got ${describe(cost)}`;
  for (const f of fields) {
    const v = cost[f];
    if (v === undefined) return `${at}.${f} is missing: the declaration's cost fields are ${fields.join(", ")}`;
    if (INT_COSTS.has(f) ? !(Number.isInteger(v) && v >= 0 && v <= MAX_EXACT) : !(typeof v === "number" && Number.isFinite(v) && v >= 0))
      return `${at}.${f} must be ${INT_COSTS.has(f) ? "an integer" : "a number"} of at least 0, got ${short(v)}`;
  }
  for (const k of Object.keys(cost)) if (cost[k] !== undefined && !fields.includes(k)) return `${at}.${k} is not a declared cost field (${fields.join(", ")})`;
  return null;
}

/**
 * What a parameter's value must be, for messages: "a number in [0, 1]".
 */
export function paramRange(p) {
  if (p.type === "bool") return "true or false";
  if (p.type === "enum") return `one of ${p.values.join(", ")}`;
  let r = p.type === "int" || p.type === "int_list" ? "an integer" : "a number";
  if (p.min !== undefined && p.max !== undefined) r += ` in [${p.min}, ${p.max}]`;
  else if (p.min !== undefined) r += ` >= ${p.min}`;
  else if (p.max !== undefined) r += ` <= ${p.max}`;
  if (p.type.endsWith("_list")) r = `a list of 1 to ${p.max_len || 2 ** 20} values, each ${r}`;
  return r;
}

function paramError(p, v) {
  const bad = `must be ${paramRange(p)}, got ${short(v)}`;
  const scalar = (t, x) => {
    if (t === "int" && !(Number.isInteger(x) && Math.abs(x) <= MAX_EXACT)) return false;
    if (t === "float" && !(typeof x === "number" && Number.isFinite(x))) return false;
    return (p.min === undefined || x >= p.min) && (p.max === undefined || x <= p.max);
  };
  switch (p.type) {
    case "bool":
      return typeof v === "boolean" ? null : bad;
    case "enum":
      return typeof v === "string" && p.values.includes(v) ? null : bad;
    case "int":
    case "float":
      return scalar(p.type, v) ? null : bad;
    case "int_list":
    case "float_list": {
      const t = p.type.slice(0, -5);
      if (!Array.isArray(v) || v.length === 0 || v.length > (p.max_len || 2 ** 20)) return bad;
      return v.every((x) => scalar(t, x)) ? null : bad;
    }
  }
  return `has an unknown type ${p.type}`;
}

/**
 * A start's parameters checked against the declaration, defaults filled in
 * for any left out. Returns [params, null] or [null, problem].
 * @param {any[]} declared the declaration's params
 * @param {unknown} given
 */
export function readParams(declared, given) {
  if (typeof given !== "object" || given === null || Array.isArray(given)) return [null, `params.params must be an object, got ${describe(given)}`];
  const out = {};
  for (const p of declared) {
    const v = given[p.name] === undefined ? p.default : given[p.name];
    const e = paramError(p, v);
    if (e) return [null, `params.params.${p.name} ${e}`];
    out[p.name] = v;
  }
  for (const k of Object.keys(given)) {
    if (!declared.some((p) => p.name === k))
      return [null, `params.params.${k} is not a declared parameter (${declared.length ? declared.map((p) => p.name).join(", ") : "the agent declares none"})`];
  }
  return [out, null];
}
