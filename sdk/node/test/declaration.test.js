// A malformed declaration is refused before any seed runs, with the field
// named; volatile paths are checked for their syntax.
import { test } from "node:test";
import assert from "node:assert/strict";
import { checkDeclaration, checkVolatile, readParams, valuesError, costError } from "../src/declaration.js";

const good = () => ({
  name: "coin", version: "1",
  params: [{ name: "p", type: "float", default: 0.5, min: 0, max: 1 }, { name: "k", type: "int_list", default: [2, 5], min: 1, max_len: 3 }, { name: "mode", type: "enum", default: "a", values: ["a", "b"] }],
  task: [{ name: "flawed_task", type: "bool" }],
  features: [{ name: "heads", type: "int" }, { name: "kind", type: "enum", values: ["x", "y"] }],
  hidden: [{ name: "flawed", type: "bool" }],
  fault_flag: "flawed",
  actions: ["no_tool", "flip", "reweigh"],
  interventions: [{ arm: "on", action: "reweigh" }],
  cost: { fields: ["steps", "usd"] },
});

test("a good declaration passes, with or without volatile paths", () => {
  checkDeclaration(good());
  checkDeclaration({ ...good(), volatile: ["forks[*].checkpoint.ts", "forks[0].checkpoint.channel_values.messages[*].kwargs.id", "task.*"] });
});

test("a malformed declaration is refused, naming the field", () => {
  const cases = [
    [(d) => delete d.features, "declaration.features is missing"],
    [(d) => (d.features = []), "declaration.features must not be empty"],
    [(d) => (d.features[1].type = "str"), 'declaration.features[1].type must be one of "bool", "int", "float", "enum", got "str"'],
    [(d) => (d.name = "Coin"), 'declaration.name must match ^[a-z][a-z0-9_]{0,62}$, got "Coin"'],
    [(d) => (d.features[0].unit = 3), "declaration.features[0].unit must be a string, got an integer"],
    [(d) => (d.colour = "red"), "declaration.colour is not a known field here (known: name, version, description, params, task, features, hidden, fault_flag, actions, interventions, cost, score, nondeterministic, volatile)"],
    [(d) => (d.features[1] = { name: "heads", type: "int" }), 'declaration.features[1]: "heads" is repeated (features[0] has it)'],
    [(d) => delete d.features[1].values, "declaration.features[1]: an enum lists its values"],
    [(d) => (d.features[0].values = ["a"]), "declaration.features[0]: only an enum lists values"],
    [(d) => (d.features[0].name = "hidden_x"), "declaration.features[0].name: the hidden_ prefix is for hidden truth"],
    [(d) => (d.params[0].name = "heads"), 'declaration.params[0].name: "heads" is already features[0].name'],
    [(d) => (d.params[0].default = 2), "declaration.params[0].default: must be a number in [0, 1], got 2"],
    [(d) => (d.params[1].default = [2, 5, 7, 9]), "declaration.params[1].default: must be a list of 1 to 3 values, each an integer >= 1, got [2,5,7,9]"],
    [(d) => delete d.params[2].default, "declaration.params[2].default is missing"],
    [(d) => (d.task[0].name = "kind"), 'declaration.task[0].name: "kind" is already a feature\'s name'],
    [(d) => (d.fault_flag = "heads"), 'declaration.fault_flag: "heads" must name a bool hidden field'],
    [(d) => (d.actions[0] = "flip"), 'declaration.actions[0]: must be "no_tool" (a model turn without a tool call), got "flip"'],
    [(d) => (d.interventions[0].action = "shake"), 'declaration.interventions[0].action: "shake" is not among the actions (no_tool, flip, reweigh)'],
    [(d) => d.interventions.push({ arm: "on", action: "flip" }), "declaration.interventions[1].arm: arm on has two interventions"],
    [(d) => (d.interventions[0].arm = "aa"), 'declaration.interventions[0].arm must be one of "on", "placebo", got "aa"'],
    [(d) => (d.cost.fields = ["usd"]), 'declaration.cost.fields: must include "steps"'],
    [(d) => (d.cost.fields = ["usd", "steps"]), "declaration.cost.fields: must be in the order steps, tokens, usd, seconds"],
    [(d) => (d.volatile = ["checkpoint.ts"]), 'declaration.volatile[0]: "checkpoint.ts" matches nothing: a path starts at start\'s result, whose keys are task and forks (e.g. "forks[*].checkpoint.ts")'],
    [(d) => (d.volatile = ["forks[x].ts"]), 'declaration.volatile[0]: "forks[x].ts": "forks[x]" is not a key ("name" or "*") followed by indices ("[2]" or "[*]"); write keys joined by ".", e.g. "forks[*].checkpoint.ts"'],
    [(d) => (d.volatile = "forks"), 'declaration.volatile: must be an array of paths such as "forks[*].checkpoint.ts", got a string'],
  ];
  for (const [mutate, want] of cases) {
    const d = good();
    mutate(d);
    assert.throws(() => checkDeclaration(d), (e) => e.name === "DeclarationError" && e.message === want, want);
  }
});

test("volatile paths: keys joined by dots, * for any key, [N] or [*] for items", () => {
  assert.equal(checkVolatile(["forks[*].checkpoint.ts", "forks[0][1].x", "*.y", "task.seed_drawn"]), null);
  assert.match(checkVolatile(["forks..ts"]), /"" is not a key/);
  assert.match(checkVolatile([""]), /must be a non-empty string/);
});

test("start's params: defaults filled in, type and range checked", () => {
  const d = good();
  assert.deepEqual(readParams(d.params, {}), [{ p: 0.5, k: [2, 5], mode: "a" }, null]);
  assert.deepEqual(readParams(d.params, { p: 1, mode: "b" }), [{ p: 1, k: [2, 5], mode: "b" }, null]);
  assert.deepEqual(readParams(d.params, { p: 1.5 }), [null, "params.params.p must be a number in [0, 1], got 1.5"]);
  assert.deepEqual(readParams(d.params, { k: [0] }), [null, "params.params.k must be a list of 1 to 3 values, each an integer >= 1, got [0]"]);
  assert.deepEqual(readParams(d.params, { q: 1 }), [null, "params.params.q is not a declared parameter (p, k, mode)"]);
});

test("declared values and costs in a reply", () => {
  const f = good().features;
  assert.equal(valuesError("features", f, { heads: 1, kind: "x" }, "result.forks[0].features"), null);
  assert.equal(valuesError("features", f, { kind: "x" }, "result.forks[0].features"), "result.forks[0].features.heads is missing: the declaration lists it (int)");
  assert.equal(valuesError("features", f, { heads: 1.5, kind: "x" }, "r"), "r.heads must be an integer, got a number (1.5)");
  assert.equal(valuesError("features", f, { heads: 2 ** 54, kind: "x" }, "r"), "r.heads must be an integer within ±2^53, got 18014398509481984");
  assert.equal(valuesError("features", f, { heads: 1, kind: "z" }, "r"), 'r.kind must be one of x, y, got "z"');
  assert.equal(valuesError("features", f, { heads: 1, kind: "x", more: 1 }, "r"), "r.more is not declared: the declaration's features are heads, kind");
  assert.equal(valuesError("features", f, { heads: null, kind: "x" }, "r"), "r.heads is null, but the declaration does not make it nullable");
  assert.equal(costError(["steps", "usd"], { steps: 1, usd: 0.5 }, "c"), null);
  assert.equal(costError(["steps", "usd"], { steps: 1 }, "c"), "c.usd is missing: the declaration's cost fields are steps, usd");
  assert.equal(costError(["steps"], { steps: 1, tokens: 3 }, "c"), "c.tokens is not a declared cost field (steps)");
  assert.equal(costError(["steps"], { steps: 0.5 }, "c"), "c.steps must be an integer of at least 0, got 0.5");
});
