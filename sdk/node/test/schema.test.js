// The SDK's validator of the protocol's schemas (its bundled copies): the
// place and the problem named, as forklab names them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { validate, schemaNames, keywordError } from "../src/schema.js";

const fork = { fork_step: 2, over: false, checkpoint: { s: 1 }, features: { a: 1 }, hidden: {}, cost: { steps: 2 } };

test("every bundled schema loads, its $refs resolved", () => {
  assert.deepEqual(schemaNames(), ["branch.params", "branch.result", "common", "declaration", "fold.params", "fold.result", "initialize.params", "initialize.result", "inspect.params", "inspect.result", "load.params", "load.result", "request", "response", "runs.params", "runs.result", "shutdown.params", "shutdown.result", "start.params", "start.result"]);
  assert.equal(validate("start.result", { task: {}, forks: [fork] }, "result"), null);
});

test("problems are named by place", () => {
  const cases = [
    ["start.result", { task: {}, forks: [{ ...fork, cost: { steps: 1.5 } }] }, "result.forks[0].cost.steps must be an integer, got a number"],
    ["start.result", { task: {}, forks: [{ ...fork, cost: { steps: -1 } }] }, "result.forks[0].cost.steps must be at least 0, got -1"],
    ["start.result", { task: {}, forks: [{ ...fork, features: { "Bad Name": 1 } }] }, 'result.forks[0].features["Bad Name"] is not an allowed name: it must match ^[a-z][a-z0-9_]{0,62}$, got "Bad Name"'],
    ["start.result", { task: {}, forks: [{ ...fork, checkpoint: null }] }, "result.forks[0].checkpoint must not be null"],
    ["start.result", { task: {}, forks: [{ ...fork, extra: 1 }] }, "result.forks[0].extra is not a known field here (known: fork_step, over, checkpoint, features, hidden, cost)"],
    ["start.result", { task: {}, forks: [] }, "result.forks must not be empty"],
    ["start.result", { forks: [fork] }, "result.task is missing"],
    ["start.result", { task: {}, forks: [{ ...fork, features: { a: Number.NaN } }] }, "result.forks[0].features.a must be a boolean or a finite number or a string or null, got NaN"],
    ["branch.result", { branches: [{ success: "yes", cost: { steps: 1 } }] }, "result.branches[0].success must be a boolean, got a string"],
    ["branch.result", { branches: [{ error: { code: 1 } }] }, "result.branches[0].error.message is missing"],
    ["start.params", { seed: 2n ** 63n, fork_steps: [1], params: {}, model: { temperature: 0, no_tool: 0 } }, "params.seed must be at most 9223372036854775807, got 9223372036854775808"],
    ["start.params", { seed: "seven", fork_steps: [1], params: {}, model: { temperature: 0, no_tool: 0 } }, "params.seed must be an integer, got a string"],
    ["branch.params", { seed: 1, fork_step: 1, checkpoint: {}, branches: [{ arm: "sideways", intervention: null, replica: 0, noise_key: "0123456789abcdef" }] }, 'params.branches[0].arm must be one of "off", "on", "placebo", "aa", "policy", got "sideways"'],
    ["shutdown.result", { a: 1 }, "result must be empty ({}), got keys a"],
    ["declaration", { name: "x", version: "1", features: [{ name: "a", type: "int" }, { name: "a", type: "int" }], cost: { fields: ["steps", "steps"] } }, "declaration.cost.fields[1] repeats item 0 (\"steps\"): items must be unique"],
  ];
  for (const [name, value, want] of cases) assert.equal(validate(name, value, name.endsWith("params") ? "params" : name === "declaration" ? "declaration" : "result"), want, JSON.stringify(value, (k, v) => (typeof v === "bigint" ? String(v) : v)));
});

test("a seed up to 2^63-1 passes exactly, as a BigInt", () => {
  assert.equal(validate("start.params", { seed: 2n ** 63n - 1n, fork_steps: [1], params: {}, model: { temperature: 0, no_tool: 0 } }, "params"), null);
});

test("a keyword the validator does not implement is refused, naming the file and place", () => {
  assert.equal(keywordError({ properties: { a: { if: { type: "string" } } } }, "x.schema.json"), 'schemas/agent-protocol/x.schema.json at /properties/a: keyword "if" is not one the SDK\'s validator implements (sdk/node/src/schema.js)');
  assert.equal(keywordError({ type: "object", description: "d", properties: { a: { oneOf: [{ const: 1 }] } } }, "x.schema.json"), null);
});
