"""The world declaration's rules, and the replies checked against a
declaration: what forklab checks (pipeline/world.Declaration.Validate and
the reply decoders of pipeline/lab/agentproc), said by the SDK in the
agent's own process, naming the field, before anything is sent.

The one rule left to forklab is the reserved column names (a feature named
"seed", say): forklab refuses such a declaration at initialize, naming it,
before any seed runs.
"""
import math
import re

from .schema import at, kind, show

NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
KINDS = ("bool", "int", "float", "enum")
PARAM_KINDS = KINDS + ("int_list", "float_list")
COST_FIELDS = ("steps", "tokens", "usd", "seconds")
EXACT = 2 ** 53  # ints are exact in a JSON double within ±2^53 (docs/agent-protocol.md)
MAX_LIST = 1 << 20  # a list parameter's length when max_len is 0 or absent

# A volatile path: keys joined by ".", array indices [N] or [*], * for any
# object key (CONTRACTS; docs/agent-protocol.md, "Checking an agent").
VOLATILE = re.compile(r"^(?:\*|[^.\[\]*]+)(?:\[(?:\d+|\*)\])*(?:\.(?:\*|[^.\[\]*]+)(?:\[(?:\d+|\*)\])*)*$")


class DeclarationError(ValueError):
    """A declaration that breaks the protocol's rules; the message names
    the field (declaration.features[2].type: …)."""


def rules(d):
    """Checks what the schema cannot say of declaration d (already valid
    against declaration.schema.json): names unique, enums with values, the
    fault flag a bool hidden field, actions and interventions, the cost
    fields and their order, parameter defaults within their own ranges,
    volatile paths. Raises DeclarationError naming the field."""
    def fail(path, msg):
        raise DeclarationError("declaration.%s: %s" % (path, msg))

    for group in ("task", "features", "hidden"):
        seen = {}
        for i, f in enumerate(d.get(group, [])):
            where = "%s[%d]" % (group, i)
            if f["name"] in seen:
                fail(where + ".name", "%r is declared twice (also %s[%d])" % (f["name"], group, seen[f["name"]]))
            seen[f["name"]] = i
            if (f["type"] == "enum") != ("values" in f):
                fail(where, "an enum lists its values, and only an enum does" if f["type"] == "enum" else "values are for enums only")
    features = {f["name"] for f in d["features"]}
    for i, f in enumerate(d["features"]):
        if f["name"].startswith("hidden_"):
            fail("features[%d].name" % i, "the hidden_ prefix is for hidden truth")
    for i, t in enumerate(d.get("task", [])):
        if t["name"] in features:
            fail("task[%d].name" % i, "%r is already a feature's name" % t["name"])
        if t["name"].startswith(("hidden_", "cost_", "extra_")):
            fail("task[%d].name" % i, "the hidden_, cost_ and extra_ prefixes are for fixed and hidden columns")
    for i, f in enumerate(d["features"]):
        if f["name"].startswith(("cost_", "extra_")):
            fail("features[%d].name" % i, "the cost_ and extra_ prefixes are for the fixed cost columns")
    params = {}
    for i, p in enumerate(d.get("params", [])):
        where = "params[%d]" % i
        if p["name"] in params or p["name"] in features:
            fail(where + ".name", "%r is declared twice (parameters and features share one namespace)" % p["name"])
        params[p["name"]] = p
        param_rules(p, where, fail)
    flag = d.get("fault_flag")
    if flag is not None:
        hidden = {h["name"]: h for h in d.get("hidden", [])}
        if flag not in hidden or hidden[flag]["type"] != "bool":
            fail("fault_flag", "%r must name a bool hidden field" % flag)
    actions = d.get("actions")
    if actions:
        if actions[0] != "no_tool":
            fail("actions[0]", 'must be "no_tool" (a model turn without a tool call), got %s' % show(actions[0]))
        if len(actions) > 255:
            fail("actions", "at most 255 actions, got %d" % len(actions))
    arms = {}
    for i, iv in enumerate(d.get("interventions", [])):
        if iv["arm"] in arms:
            fail("interventions[%d].arm" % i, "arm %s has two interventions (also interventions[%d])" % (iv["arm"], arms[iv["arm"]]))
        arms[iv["arm"]] = i
        if actions and iv["action"] not in actions:
            fail("interventions[%d].action" % i, "%r is not among the actions (%s)" % (iv["action"], ", ".join(actions)))
    fields = d["cost"]["fields"]
    if "steps" not in fields:
        fail("cost.fields", 'must include "steps"')
    if list(fields) != [c for c in COST_FIELDS if c in fields]:
        fail("cost.fields", "list each field once, in the order %s" % ", ".join(COST_FIELDS))
    for i, p in enumerate(d.get("volatile", [])):
        if not VOLATILE.match(p):
            fail("volatile[%d]" % i, "%s is not a path: keys joined by '.', array indices [N] or [*], * for any key (e.g. forks[*].checkpoint.ts)" % show(p))
        root = re.split(r"[.\[]", p, 1)[0]
        if root not in ("task", "forks"):
            fail("volatile[%d]" % i, "%s: a path into start's result begins with task or forks (did you mean forks[*].%s?)" % (show(p), p))


def param_rules(p, where, fail):
    """A parameter's values, bounds and default."""
    k = p["type"]
    if (k == "enum") != ("values" in p):
        fail(where, "an enum lists its values, and only an enum does" if k == "enum" else "values are for enums only")
    problem = param_value(p, p["default"])
    if problem:
        fail(where + ".default", problem)


def param_value(p, v):
    """What is wrong with v as a value of parameter p, or None."""
    k = p["type"]
    if k.endswith("_list"):
        if not isinstance(v, list) or not v:
            return "must be a list of at least one value, got %s" % show(v)
        cap = p.get("max_len") or MAX_LIST
        if len(v) > cap:
            return "holds %d values, more than max_len %d" % (len(v), cap)
        for x in v:
            e = param_value(dict(p, type=k[:-5]), x)
            if e:
                return e
        return None
    if k == "bool":
        return None if isinstance(v, bool) else "must be true or false, got %s" % show(v)
    if k == "enum":
        return None if v in p["values"] else "must be one of %s, got %s" % (", ".join(p["values"]), show(v))
    if k == "int" and not (isinstance(v, int) and not isinstance(v, bool) and abs(v) <= EXACT):
        return "must be an integer within ±2^53, got %s" % show(v)
    if k == "float" and not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)):
        return "must be a finite number, got %s" % show(v)
    if "min" in p and v < p["min"] or "max" in p and v > p["max"]:
        return "%s is outside [%s, %s]" % (show(v), show(p.get("min", "-inf")), show(p.get("max", "+inf")))
    return None


def whole(v):
    """A float that holds a whole number, as an int (Python's json writes
    every float with a decimal point, which forklab refuses for an int)."""
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def values(fields, vals, where):
    """Checks declared values (task draws, features, hidden truth) against
    their fields: every field present, no other, each of its type. Whole
    floats of int fields become ints. Returns None or the problem."""
    if not isinstance(vals, dict):
        return "%s: must be an object, got %s" % (where, kind(vals))
    for f in fields:
        name = f["name"]
        if name not in vals:
            return "%s.%s is missing: the declaration lists it (%s)" % (where, name, f["type"])
        v = vals[name]
        if v is None:
            if f.get("nullable"):
                continue
            return "%s.%s is null, but the declaration does not make it nullable" % (where, name)
        t = f["type"]
        if t == "int":
            v = vals[name] = whole(v)
            if not isinstance(v, int) or isinstance(v, bool):
                return "%s.%s must be an integer, got %s" % (where, name, show(v) if isinstance(v, float) else kind(v))
            if abs(v) > EXACT:
                return "%s.%s must be an integer within ±2^53, got %d" % (where, name, v)
        elif t == "float":
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                return "%s.%s must be a number, got %s" % (where, name, kind(v))
            if not math.isfinite(v):
                return "%s.%s is %s, which JSON does not allow: write null (a nullable field takes null)" % (where, name, v)
        elif t == "bool":
            if not isinstance(v, bool):
                return "%s.%s must be a bool, got %s" % (where, name, kind(v))
        elif v not in f["values"]:
            return "%s.%s must be one of %s, got %s" % (where, name, ", ".join(f["values"]), show(v))
    if len(vals) != len(fields):
        names = {f["name"] for f in fields}
        extra = sorted(k for k in vals if k not in names)
        return "%s.%s is not declared (declared: %s)" % (where, extra[0], ", ".join(sorted(names)) or "none")
    return None


def cost(fields, c, where):
    """Checks a cost against the declared cost fields."""
    if not isinstance(c, dict):
        return "%s: must be an object, got %s" % (where, kind(c))
    for f in fields:
        if f not in c:
            return "%s.%s is missing: the declaration's cost fields are %s" % (where, f, ", ".join(fields))
        v = c[f]
        if f in ("steps", "tokens"):
            v = c[f] = whole(v)
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= EXACT:
                return "%s.%s must be an integer in [0, 2^53], got %s" % (where, f, show(v))
        elif not isinstance(v, (int, float)) or isinstance(v, bool) or not (math.isfinite(v) and v >= 0):
            return "%s.%s must be a finite number >= 0, got %s" % (where, f, show(v))
    for k in c:
        if k not in fields:
            return "%s.%s is not among the declared cost fields (%s)" % (where, k, ", ".join(fields))
    return None


def fork(d, f, where, zero=False):
    """Checks one fork (a start's, a load's, fold's result, inspect's result)."""
    if not isinstance(f, dict):
        return "%s: must be an object, got %s" % (where, kind(f))
    if "fork_step" in f:
        f["fork_step"] = whole(f["fork_step"])
    for group, key in (("features", "features"), ("hidden", "hidden")):
        if key in f:
            e = values(d.get(group, []), f[key], at(where, key))
            if e:
                return e
    if "cost" in f:
        return cost(d["cost"]["fields"], f["cost"], at(where, "cost"))
    return None


def start_result(d, params, r):
    """Checks start's (or load's) result against the declaration and the
    fork steps asked."""
    if not isinstance(r, dict):
        return "result: must be an object, got %s" % kind(r)
    if "task" in r:
        e = values(d.get("task", []), r["task"], "result.task")
        if e:
            return e
    forks = r.get("forks")
    steps = params.get("fork_steps") or []
    if isinstance(forks, list):
        if len(forks) != len(steps):
            return "result.forks has %d entries for %d fork steps asked" % (len(forks), len(steps))
        for i, f in enumerate(forks):
            e = fork(d, f, "result.forks[%d]" % i)
            if e:
                return e
            if isinstance(f, dict) and f.get("fork_step") != steps[i]:
                return "result.forks[%d].fork_step is %s, but fork step %d was asked there" % (i, show(f.get("fork_step")), steps[i])
    return None


def branch_result(d, params, r):
    """Checks branch's result: one entry per branch asked, each an outcome
    with the declared cost fields, or an error."""
    if not isinstance(r, dict) or not isinstance(r.get("branches"), list):
        return None  # the schema says what is wrong
    asked = params.get("branches") or []
    if len(r["branches"]) != len(asked):
        return "result.branches has %d entries for %d branches asked" % (len(r["branches"]), len(asked))
    for i, b in enumerate(r["branches"]):
        if isinstance(b, dict) and "error" not in b and "cost" in b:
            e = cost(d["cost"]["fields"], b["cost"], "result.branches[%d].cost" % i)
            if e:
                return e
    return None


def fold_result(d, params, r):
    return fork(d, r, "result")


# The declaration checks of each method's result, beside its schema: the
# methods of forklab-agent/1 and those CONTRACTS adds (load's result is
# start's shape, inspect's a fork's features, hidden truth and cost).
RESULT_CHECKS = {"start": start_result, "load": start_result, "branch": branch_result,
                 "fold": fold_result, "inspect": fold_result}
