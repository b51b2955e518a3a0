// The JSON Schemas of forklab-agent/1, bundled with the package as copies of
// the repository's schemas/agent-protocol/ (a Go test fails when a copy
// differs; `make sdk-schemas` re-syncs them), and a validator of the part of
// JSON Schema 2020-12 those files use.
//
// The validator is the package's own so that the SDK has no dependencies:
// npm links a local folder (`npm install ./sdk/node`) without installing
// the folder's own dependencies, so a dependency would break that install.
// It refuses, when the schemas load, a keyword it does not implement: a
// schema that starts using one fails the SDK's tests instead of being
// checked loosely.

import { readdirSync, readFileSync } from "node:fs";
import { parseLine } from "./json.js";

const dir = new URL("../schemas/agent-protocol/", import.meta.url);

// Keywords that only annotate: no effect on validity.
const annotations = new Set(["$schema", "$id", "$defs", "$comment", "title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly"]);
// Keywords the validator implements.
const implemented = new Set([
  "type", "enum", "const", "properties", "required", "additionalProperties", "items", "minItems", "maxItems", "uniqueItems",
  "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "pattern",
  "minProperties", "maxProperties", "propertyNames", "oneOf", "anyOf", "allOf", "not", "$ref",
]);

/** @type {Map<string, object>} file name (without .schema.json) → schema */
const files = new Map();
for (const f of readdirSync(dir).filter((f) => f.endsWith(".schema.json")).sort()) {
  // Read exactly: a bound such as 2^63-1 is a BigInt, not the double 2^63.
  const schema = parseLine(readFileSync(new URL(f, dir), "utf8"));
  const e = keywordError(schema, f);
  if (e) throw new Error(e);
  files.set(f.slice(0, -".schema.json".length), schema);
}

// Each $ref resolved once, when the schemas load: the schema object holds
// its target under this symbol.
const target = Symbol("$ref target");
for (const [f, s] of files) linkRefs(s, f);

function linkRefs(s, file) {
  if (typeof s !== "object" || s === null) return;
  if (typeof s.$ref === "string") Object.defineProperty(s, target, { value: lookup(s.$ref, file) });
  for (const v of Object.values(s)) linkRefs(v, file);
}

/**
 * The first keyword of a schema the validator does not implement, as a
 * message naming the file and place; null when there is none.
 * @param {unknown} s
 * @param {string} file the schema's file name
 * @returns {string | null}
 */
export function keywordError(s, file, at = "") {
  if (typeof s !== "object" || s === null) return null;
  for (const [k, v] of Object.entries(s)) {
    if (!annotations.has(k) && !implemented.has(k))
      return `schemas/agent-protocol/${file}${at ? ` at ${at}` : ""}: keyword ${JSON.stringify(k)} is not one the SDK's validator implements (sdk/node/src/schema.js)`;
    let e = null;
    if (k === "properties" || k === "$defs") for (const [n, x] of Object.entries(v)) e ??= keywordError(x, file, `${at}/${k}/${n}`);
    else if (k === "oneOf" || k === "anyOf" || k === "allOf") v.forEach((x, i) => (e ??= keywordError(x, file, `${at}/${k}/${i}`)));
    else if (["items", "additionalProperties", "not", "propertyNames"].includes(k)) e = keywordError(v, file, `${at}/${k}`);
    if (e) return e;
  }
  return null;
}

/**
 * The names of the bundled schemas: "start.result", "declaration", ….
 * @returns {string[]}
 */
export function schemaNames() {
  return [...files.keys()];
}

/**
 * Whether a bundled schema of this name exists.
 * @param {string} name
 */
export function hasSchema(name) {
  return files.has(name);
}

/**
 * The bundled schema of this name, as parsed JSON.
 * @param {string} name
 */
export function schema(name) {
  const s = files.get(name);
  if (!s) throw new Error(`no schema ${name}.schema.json in the SDK's copy of schemas/agent-protocol`);
  return s;
}

/**
 * Checks value against the named schema. Returns null when it is valid, or
 * the first problem as "where what", where being a path from prefix
 * (result.forks[0].cost.steps must be an integer). Where alternatives
 * (oneOf, anyOf) all fail, the problem quoted is the one found deepest in
 * the value: the place closest to the mistake.
 * @param {string} name file name without .schema.json
 * @param {unknown} value
 * @param {string} prefix the path of value, e.g. "result"
 * @returns {string | null}
 */
export function validate(name, value, prefix) {
  const e = check(schema(name), value, name);
  return e && `${where(prefix, e.path)} ${e.msg}`;
}

/** Writes a path as JavaScript would: a.b[0]["odd key"]. */
export function where(prefix, path) {
  let s = prefix;
  for (const p of path) s += typeof p === "number" ? `[${p}]` : /^[A-Za-z_$][\w$]*$/.test(p) ? `.${p}` : `[${JSON.stringify(p)}]`;
  return s;
}

/** Describes a value's JSON type for messages: "a string", "null", "an integer". */
export function describe(v) {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  if (typeof v === "bigint") return "an integer beyond 2^53";
  if (typeof v === "number") return Number.isInteger(v) ? "an integer" : Number.isFinite(v) ? "a number" : String(v);
  if (typeof v === "object") return "an object";
  if (typeof v === "boolean") return "a boolean";
  if (typeof v === "string") return "a string";
  return typeof v === "undefined" ? "undefined" : `a ${typeof v}`;
}

const regexps = new Map();

function regexp(pattern) {
  let r = regexps.get(pattern);
  if (!r) regexps.set(pattern, (r = new RegExp(pattern, "u")));
  return r;
}

function lookup(ref, file) {
  const [path, frag = ""] = ref.split("#");
  const f = path === "" ? file : path.replace(/\.schema\.json$/, "");
  let s = files.get(f);
  if (!s) throw new Error(`$ref ${ref} in ${file}.schema.json: no such schema`);
  for (const part of frag.split("/").filter(Boolean)) {
    s = s?.[part.replace(/~1/g, "/").replace(/~0/g, "~")];
    if (s === undefined) throw new Error(`$ref ${ref} in ${file}.schema.json: no such place`);
  }
  return { s, f };
}

const isObject = (v) => typeof v === "object" && v !== null && !Array.isArray(v);

function typeOk(t, v) {
  switch (t) {
    case "null": return v === null;
    case "boolean": return typeof v === "boolean";
    case "string": return typeof v === "string";
    case "array": return Array.isArray(v);
    case "object": return isObject(v);
    case "number": return (typeof v === "number" && Number.isFinite(v)) || typeof v === "bigint";
    case "integer": return (typeof v === "number" && Number.isInteger(v)) || typeof v === "bigint";
  }
  return false;
}

const typeName = { null: "null", boolean: "a boolean", string: "a string", array: "an array", object: "an object", number: "a finite number", integer: "an integer" };

function equal(a, b) {
  if (a === b) return true;
  if (typeof a === "bigint" || typeof b === "bigint") return false;
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, i) => equal(x, b[i]));
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a).filter((k) => a[k] !== undefined), kb = Object.keys(b).filter((k) => b[k] !== undefined);
    return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && equal(a[k], b[k]));
  }
  return false;
}

const num = (v) => (typeof v === "bigint" ? Number(v) : v);

// check returns null, or the problem: its message and the path from v to
// where it is. The path is built on the way back up, so that a valid value
// costs no allocation.
/**
 * @returns {{path: (string|number)[], msg: string} | null}
 */
function check(s, v, file) {
  if (s === true) return null;
  if (s === false) return fault("is not allowed here");
  if (s.$ref !== undefined) {
    const r = s[target];
    const e = check(r.s, v, r.f);
    if (e) return e;
  }
  if (s.type !== undefined) {
    const ok = typeof s.type === "string" ? typeOk(s.type, v) : s.type.some((t) => typeOk(t, v));
    if (!ok) return fault(`must be ${(Array.isArray(s.type) ? s.type : [s.type]).map((t) => typeName[t]).join(" or ")}, got ${describe(v)}`);
  }
  if (s.const !== undefined && !equal(s.const, v)) return fault(`must be ${JSON.stringify(s.const)}, got ${short(v)}`);
  if (s.enum !== undefined && !s.enum.some((x) => equal(x, v))) return fault(`must be one of ${s.enum.map((x) => JSON.stringify(x)).join(", ")}, got ${short(v)}`);
  if (typeof v === "number" || typeof v === "bigint") {
    const n = num(v);
    if (s.minimum !== undefined && !atLeast(v, s.minimum)) return fault(`must be at least ${s.minimum}, got ${v}`);
    if (s.maximum !== undefined && !atMost(v, s.maximum)) return fault(`must be at most ${s.maximum}, got ${v}`);
    if (s.exclusiveMinimum !== undefined && !(n > s.exclusiveMinimum)) return fault(`must be more than ${s.exclusiveMinimum}, got ${v}`);
    if (s.exclusiveMaximum !== undefined && !(n < s.exclusiveMaximum)) return fault(`must be less than ${s.exclusiveMaximum}, got ${v}`);
  }
  if (typeof v === "string") {
    // Length in code points.
    const len = s.minLength === undefined && s.maxLength === undefined ? 0 : [...v].length;
    if (s.minLength !== undefined && len < s.minLength) return fault(s.minLength === 1 ? "must not be empty" : `must be at least ${s.minLength} characters long`);
    if (s.maxLength !== undefined && len > s.maxLength) return fault(`must be at most ${s.maxLength} characters long`);
    if (s.pattern !== undefined && !regexp(s.pattern).test(v)) return fault(`must match ${s.pattern}, got ${short(v)}`);
  }
  if (Array.isArray(v)) {
    if (s.minItems !== undefined && v.length < s.minItems) return fault(s.minItems === 1 ? "must not be empty" : `must hold at least ${s.minItems} items, got ${v.length}`);
    if (s.maxItems !== undefined && v.length > s.maxItems) return fault(`must hold at most ${s.maxItems} items, got ${v.length}`);
    if (s.uniqueItems) {
      for (let i = 1; i < v.length; i++) for (let j = 0; j < i; j++) if (equal(v[i], v[j])) return under(i, fault(`repeats item ${j} (${short(v[i])}): items must be unique`));
    }
    if (s.items !== undefined) {
      for (let i = 0; i < v.length; i++) {
        const e = check(s.items, v[i], file);
        if (e) return under(i, e);
      }
    }
  }
  if (isObject(v)) {
    if (s.required !== undefined) for (const r of s.required) if (v[r] === undefined) return under(r, fault("is missing"));
    if (s.minProperties !== undefined || s.maxProperties !== undefined) {
      const keys = Object.keys(v).filter((k) => v[k] !== undefined);
      if (s.minProperties !== undefined && keys.length < s.minProperties) return fault(`must have at least ${s.minProperties} properties`);
      if (s.maxProperties !== undefined && keys.length > s.maxProperties) return fault(s.maxProperties === 0 ? `must be empty ({}), got keys ${keys.join(", ")}` : `must have at most ${s.maxProperties} properties`);
    }
    if (s.properties !== undefined || s.additionalProperties !== undefined || s.propertyNames !== undefined) {
      for (const k in v) {
        if (!Object.hasOwn(v, k) || v[k] === undefined) continue;
        if (s.propertyNames !== undefined) {
          const e = check(s.propertyNames, k, file);
          if (e) return under(k, fault(`is not an allowed name: it ${e.msg}`));
        }
        if (s.properties !== undefined && Object.hasOwn(s.properties, k)) {
          const e = check(s.properties[k], v[k], file);
          if (e) return under(k, e);
        } else if (s.additionalProperties !== undefined) {
          if (s.additionalProperties === false) return under(k, fault(`is not a known field here${s.properties ? ` (known: ${Object.keys(s.properties).join(", ")})` : ""}`));
          const e = check(s.additionalProperties, v[k], file);
          if (e) return under(k, e);
        }
      }
    }
  }
  if (s.allOf !== undefined) {
    for (const sub of s.allOf) {
      const e = check(sub, v, file);
      if (e) return e;
    }
  }
  if (s.anyOf !== undefined) {
    const errs = s.anyOf.map((sub) => check(sub, v, file));
    if (errs.every(Boolean)) return deepest(errs);
  }
  if (s.oneOf !== undefined) {
    const errs = s.oneOf.map((sub) => check(sub, v, file));
    const ok = errs.filter((e) => !e).length;
    if (ok === 0) return deepest(errs);
    if (ok > 1) return fault(`matches ${ok} of the alternatives where exactly one must match`);
  }
  if (s.not !== undefined && !check(s.not, v, file)) {
    return fault(s.not.type === "null" ? "must not be null" : `must not match ${JSON.stringify(s.not)}`);
  }
  return null;
}

const fault = (msg) => ({ path: [], msg });

// The sign of v - b, exact where either is a BigInt (a seed, the bound 2^63-1).
function cmp(v, b) {
  if (typeof v === "bigint" && typeof b === "bigint") return v < b ? -1 : v > b ? 1 : 0;
  if (typeof v === "bigint") return Number.isInteger(b) ? cmp(v, BigInt(b)) : Math.sign(Number(v) - b);
  if (typeof b === "bigint") return Number.isInteger(v) ? cmp(BigInt(v), b) : Math.sign(v - Number(b));
  return Math.sign(v - b);
}
const atLeast = (v, b) => cmp(v, b) >= 0;
const atMost = (v, b) => cmp(v, b) <= 0;

function under(key, e) {
  e.path.unshift(key);
  return e;
}

function deepest(errs) {
  return errs.reduce((a, b) => (b.path.length > a.path.length ? b : a));
}

/** A value quoted for a message, cut short. */
export function short(v) {
  let s;
  try {
    s = typeof v === "bigint" ? String(v) : JSON.stringify(v);
  } catch {
    s = String(v);
  }
  if (s === undefined) s = String(v);
  return s.length > 60 ? s.slice(0, 57) + "…" : s;
}
