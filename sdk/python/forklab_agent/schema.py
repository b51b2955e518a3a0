"""A small JSON Schema (draft 2020-12) validator for the schemas of
forklab-agent/1, on the standard library only.

The schemas are the copies bundled in schemas/ (of the repository's
schemas/agent-protocol/; a Go test fails when a copy differs). Each is
compiled once into nested closures; validating a value returns None, or the
first problem as "PATH: what is wrong", PATH written from a prefix as
forklab writes it (result.forks[0].features.same_obs).

The keywords supported are those the protocol's schemas use, and a few
more: $ref (to a file and a JSON pointer), type, properties, required,
additionalProperties, propertyNames, minProperties, maxProperties, items,
minItems, maxItems, uniqueItems, minimum, maximum, exclusiveMinimum,
exclusiveMaximum, minLength, maxLength, pattern, enum, const, oneOf, anyOf,
allOf, not, if/then/else. KEYWORDS lists them; annotations (ANNOTATIONS:
title, description, format, …) are ignored; any other keyword is refused
when its schema is compiled, so that a re-synced schema that needs one
fails the SDK's tests instead of being half checked.
"""
import json
import math
import os
import re

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schemas")

KEYWORDS = frozenset([
    "$ref", "type", "properties", "required", "additionalProperties", "propertyNames", "minProperties",
    "maxProperties", "items", "minItems", "maxItems", "uniqueItems", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "minLength", "maxLength", "pattern", "enum", "const", "oneOf", "anyOf", "allOf", "not",
    "if", "then", "else",
])
ANNOTATIONS = frozenset(["title", "description", "$id", "$schema", "$defs", "default", "examples", "$comment", "format",
                         "deprecated", "readOnly", "writeOnly", "contentMediaType", "contentEncoding", "$anchor"])


def at(path, key):
    """path extended by an object key or an array index."""
    if isinstance(key, int):
        return "%s[%d]" % (path, key)
    return "%s.%s" % (path, key) if path else key


class Problem:
    """What is wrong with a value: a message, and the way to it from the
    value validated, gathered on the way out (innermost first) so that a
    value that is fine costs no path strings."""
    __slots__ = ("parts", "msg")

    def __init__(self, msg):
        self.parts, self.msg = [], msg

    def under(self, key):
        self.parts.append("[%d]" % key if isinstance(key, int) else "." + key)
        return self

    def text(self, prefix):
        path = prefix + "".join(reversed(self.parts))
        if path.startswith("."):
            path = path[1:]
        return "%s: %s" % (path or "the value", self.msg)


def show(v, limit=60):
    """A value as JSON, cut short."""
    try:
        s = json.dumps(v, separators=(",", ":"), allow_nan=True)
    except (TypeError, ValueError):
        s = repr(v)
    return s if len(s) <= limit else s[:limit] + "…"


def kind(v):
    """The JSON kind of a Python value, for messages."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int):
        return "an integer"
    if isinstance(v, float):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, (list, tuple)):
        return "an array"
    return "a %s (not JSON)" % type(v).__name__


# The Python types of each JSON type; a value of another type (a subclass)
# is looked at again with is_type.
PY_TYPES = {"null": (type(None),), "boolean": (bool,), "integer": (int,), "number": (int, float),
            "string": (str,), "object": (dict,), "array": (list, tuple)}


def is_type(v, t):
    if t == "null":
        return v is None
    if t == "boolean":
        return isinstance(v, bool)
    if t == "integer":  # a whole float is not an integer here: forklab refuses 3.0 for an int
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if t == "string":
        return isinstance(v, str)
    if t == "object":
        return isinstance(v, dict)
    if t == "array":
        return isinstance(v, (list, tuple))
    raise ValueError("unknown type %r" % t)


TYPE_WORDS = {"null": "null", "boolean": "a boolean", "integer": "an integer", "number": "a number",
              "string": "a string", "object": "an object", "array": "an array"}


def equal(a, b):
    """JSON equality: 1 == 1.0, but true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


class Registry:
    """The schema files of one directory, compiled on demand."""

    def __init__(self, directory=HERE, trusted=()):
        """trusted lists schema nodes, as (file, JSON pointer), that are
        not checked: a caller that checks them more strictly itself (the
        declared values and costs of a reply) need not pay twice."""
        self.dir = directory
        self.docs = {}
        self.compiled = {key: (lambda v: None) for key in trusted}
        self.trusted = set(trusted)
        self.fast = None  # the Accept generator, made on first use

    def names(self):
        """The message schemas present: "start.result", "branch.params", …"""
        return sorted(f[:-len(".schema.json")] for f in os.listdir(self.dir) if f.endswith(".schema.json"))

    def has(self, name):
        return os.path.exists(os.path.join(self.dir, name + ".schema.json"))

    def doc(self, file):
        if file not in self.docs:
            with open(os.path.join(self.dir, file), encoding="utf-8") as f:
                self.docs[file] = json.load(f)
        return self.docs[file]

    def validator(self, name):
        """The validator of the message schema NAME ("start.result"): a
        function (value, prefix) -> None, or "PATH: problem" with PATH
        written from prefix (result.forks[0].cost.steps)."""
        check = self.ref(name + ".schema.json", "")
        if self.fast is None:
            self.fast = Accept(self)
        accept = self.fast.ref(name + ".schema.json", "")

        def validate(v, prefix=""):
            if accept(v):
                return None
            p = check(v)  # words the problem (or finds none: a subclass of dict, say)
            return None if p is None else p.text(prefix)
        return validate

    def ref(self, file, pointer):
        """The compiled check of a schema node: a function value -> None or
        a Problem."""
        key = (file, pointer)
        if key not in self.compiled:
            # A placeholder first, so that a recursive $ref finds itself.
            box = []
            self.compiled[key] = lambda v: box[0](v)
            node = self.doc(file)
            for part in [x for x in pointer.split("/") if x]:
                node = node[part.replace("~1", "/").replace("~0", "~")]
            box.append(self.compile(node, file))
            self.compiled[key] = box[0]
        return self.compiled[key]

    def compile(self, s, file):
        """Compiles schema node s of file into a check."""
        if s is True or s == {}:
            return lambda v: None
        if s is False:
            return lambda v: Problem("no value is allowed here")
        unknown = set(s) - KEYWORDS - ANNOTATIONS
        if unknown:
            raise ValueError("%s: unsupported JSON Schema keywords %s" % (file, ", ".join(sorted(unknown))))
        checks = []
        if "$ref" in s:
            target, _, pointer = s["$ref"].partition("#")
            checks.append(self.ref(target or file, pointer))
        if "type" in s:
            types = s["type"] if isinstance(s["type"], list) else [s["type"]]
            fast = set(t for name in types for t in PY_TYPES[name])
            if "integer" in types and "number" not in types:
                fast.discard(float)
            exact = [t for t in types]
            words = " or ".join(TYPE_WORDS[t] for t in types)
            bool_ok = "boolean" in types

            def check_type(v, fast=fast, exact=exact, words=words, bool_ok=bool_ok):
                t = type(v)
                if t in fast and (t is not bool or bool_ok):
                    return None
                if any(is_type(v, x) for x in exact):
                    return None
                return Problem("must be %s, got %s" % (words, kind(v)))
            checks.append(check_type)
        if "enum" in s:
            values = s["enum"]

            def check_enum(v, values=values):
                if not any(equal(v, x) for x in values):
                    return Problem("must be one of %s, got %s" % (", ".join(show(x) for x in values), show(v)))
            checks.append(check_enum)
        if "const" in s:
            c = s["const"]

            def check_const(v, c=c):
                if not equal(v, c):
                    return Problem("must be %s, got %s" % (show(c), show(v)))
            checks.append(check_const)
        checks += self.numbers(s)
        checks += self.strings(s)
        checks += self.objects(s, file)
        checks += self.arrays(s, file)
        checks += self.combinations(s, file)
        if not checks:
            return lambda v: None
        if len(checks) == 1:
            return checks[0]
        checks = tuple(checks)

        def check_all(v):
            for c in checks:
                p = c(v)
                if p is not None:
                    return p
        return check_all

    def numbers(self, s):
        out = []
        for key, op, word in (("minimum", lambda v, b: v >= b, ">="), ("maximum", lambda v, b: v <= b, "<="),
                              ("exclusiveMinimum", lambda v, b: v > b, ">"), ("exclusiveMaximum", lambda v, b: v < b, "<")):
            if key in s:
                def check(v, bound=s[key], op=op, word=word):
                    if type(v) in (int, float) and not op(v, bound):
                        return Problem("must be %s %s, got %s" % (word, show(bound), show(v)))
                out.append(check)
        return out

    def strings(self, s):
        out = []
        if "minLength" in s or "maxLength" in s:
            lo, hi = s.get("minLength", 0), s.get("maxLength")

            def check_len(v):
                if isinstance(v, str):
                    if len(v) < lo:
                        return Problem("must be at least %d characters long, got %s" % (lo, show(v)))
                    if hi is not None and len(v) > hi:
                        return Problem("must be at most %d characters long, got %s" % (hi, show(v)))
            out.append(check_len)
        if "pattern" in s:
            rx = re.compile(s["pattern"])
            ok = set()  # strings known to match: names repeat in every reply

            def check_pattern(v):
                if isinstance(v, str) and v not in ok:
                    if not rx.search(v):
                        return Problem("%s does not match %s" % (show(v), rx.pattern))
                    if len(ok) < 4096:
                        ok.add(v)
            out.append(check_pattern)
        return out

    def objects(self, s, file):
        props = {k: self.compile(v, file) for k, v in s.get("properties", {}).items()}
        required = tuple(s.get("required", []))
        extra = s.get("additionalProperties", True)
        extra_check = None if extra is True or extra is False else self.compile(extra, file)
        names = self.compile(s["propertyNames"], file) if "propertyNames" in s else None
        lo, hi = s.get("minProperties"), s.get("maxProperties")
        if not (props or required or extra is not True or names or lo is not None or hi is not None):
            return []

        def check_object(v):
            if not isinstance(v, dict):
                return None
            for k in required:
                if k not in v:
                    return Problem("missing property '%s'" % k)
            if hi is not None and len(v) > hi:
                return Problem("must have at most %d keys, got %d" % (hi, len(v)))
            if lo is not None and len(v) < lo:
                return Problem("must have at least %d keys, got %d" % (lo, len(v)))
            for k, x in v.items():
                if not isinstance(k, str):
                    return Problem("key %r is not a string" % (k,))
                if names is not None:
                    p = names(k)
                    if p is not None:
                        p.msg = "the key: " + p.msg
                        return p.under(k)
                c = props.get(k)
                if c is None:
                    if extra is False:
                        return Problem("unknown key '%s' (allowed: %s)" % (k, ", ".join(props) or "none"))
                    c = extra_check
                if c is not None:
                    p = c(x)
                    if p is not None:
                        return p.under(k)
        return [check_object]

    def arrays(self, s, file):
        items = self.compile(s["items"], file) if "items" in s else None
        lo, hi, unique = s.get("minItems"), s.get("maxItems"), s.get("uniqueItems", False)
        if items is None and lo is None and hi is None and not unique:
            return []

        def check_array(v):
            if not isinstance(v, (list, tuple)):
                return None
            if lo is not None and len(v) < lo:
                return Problem("must hold at least %d item%s, got %d" % (lo, "" if lo == 1 else "s", len(v)))
            if hi is not None and len(v) > hi:
                return Problem("must hold at most %d items, got %d" % (hi, len(v)))
            if unique:
                for i in range(len(v)):
                    for j in range(i):
                        if equal(v[i], v[j]):
                            return Problem("items %d and %d are equal (%s): each must appear once" % (j, i, show(v[i])))
            if items is not None:
                for i, x in enumerate(v):
                    p = items(x)
                    if p is not None:
                        return p.under(i)
        return [check_array]

    def combinations(self, s, file):
        out = []
        if "allOf" in s:
            subs = [self.compile(x, file) for x in s["allOf"]]

            def check_allof(v):
                for c in subs:
                    p = c(v)
                    if p is not None:
                        return p
            out.append(check_allof)
        for key in ("oneOf", "anyOf"):
            if key in s:
                subs = [self.compile(x, file) for x in s[key]]

                def check_some(v, subs=subs, one=key == "oneOf"):
                    problems = [c(v) for c in subs]
                    ok = problems.count(None)
                    if ok == 1 or ok > 1 and not one:
                        return None
                    if ok > 1:
                        return Problem("matches more than one of the allowed shapes")
                    # The shape that got furthest: its problem is the deepest.
                    return max(problems, key=lambda p: len(p.parts))
                out.append(check_some)
        if "not" in s:
            sub = self.compile(s["not"], file)
            word = "null" if s["not"] == {"type": "null"} else "this: %s" % show(s["not"])

            def check_not(v):
                if sub(v) is None:
                    return Problem("must not be %s" % word)
            out.append(check_not)
        if "if" in s:
            cond = self.compile(s["if"], file)
            then = self.compile(s["then"], file) if "then" in s else None
            other = self.compile(s["else"], file) if "else" in s else None

            def check_if(v):
                c = then if cond(v) is None else other
                return c(v) if c is not None else None
            out.append(check_if)
        return out


class Accept:
    """Fast acceptance: each schema node compiled to Python source, a
    function value -> bool that is True only for values the node accepts.
    The validators run it first, and the closures of Registry.compile,
    which word a problem, only when it says False: a reply that is fine
    costs one generated function call per node. Values of types other than
    the JSON ones' own (a subclass of dict) are left to the closures."""

    def __init__(self, registry):
        self.r = registry
        self.ns = {"_equal": equal, "_unique": _unique, "_true": lambda v: True}
        self.by_ref = {}
        self.by_node = {}
        self.n = 0

    def ref(self, file, pointer):
        key = (file, pointer)
        if key in self.r.trusted:
            return self.ns["_true"]
        name = self.by_ref.get(key)
        if name is None:
            node = self.r.doc(file)
            for part in [x for x in pointer.split("/") if x]:
                node = node[part.replace("~1", "/").replace("~0", "~")]
            name = self.by_ref[key] = self.node(node, file)
        return self.ns[name]

    def const(self, value):
        self.n += 1
        name = "_c%d" % self.n
        self.ns[name] = value
        return name

    def node(self, s, file):
        """The name of the generated function of node s (compiled once)."""
        key = id(s)
        if key in self.by_node:
            return self.by_node[key]
        self.n += 1
        name = self.by_node[key] = "_f%d" % self.n
        if s is True or s == {}:
            self.ns[name] = self.ns["_true"]
            return name
        if s is False:
            self.ns[name] = lambda v: False
            return name
        # A recursive reference finds the function by name at call time.
        body = []
        if "$ref" in s:
            target, _, pointer = s["$ref"].partition("#")
            key = (target or file, pointer)
            if key in self.r.trusted:
                ref = "_true"
            else:
                ref = self.by_ref.get(key)
                if ref is None:
                    node = self.r.doc(key[0])
                    for part in [x for x in pointer.split("/") if x]:
                        node = node[part.replace("~1", "/").replace("~0", "~")]
                    ref = self.by_ref[key] = self.node(node, key[0])
            body.append("if not %s(v): return False" % ref)
        types = s.get("type")
        if types is not None:
            types = types if isinstance(types, list) else [types]
            alts = []
            for t in types:
                alts += {"null": ["v is None"], "boolean": ["t is bool"], "integer": ["t is int"], "number": ["t is int", "t is float"],
                         "string": ["t is str"], "object": ["t is dict"], "array": ["t is list"]}[t]
            body.append("if not (%s): return False" % " or ".join(alts))
        if "enum" in s:
            vals = s["enum"]
            if all(isinstance(x, str) for x in vals):
                body.append("if not (t is str and v in %s): return False" % self.const(frozenset(vals)))
            else:
                body.append("if not any(_equal(v, x) for x in %s): return False" % self.const(tuple(vals)))
        if "const" in s:
            body.append("if not _equal(v, %s): return False" % self.const(s["const"]))
        num = "(t is int or t is float)"
        for key, op in (("minimum", ">="), ("maximum", "<="), ("exclusiveMinimum", ">"), ("exclusiveMaximum", "<")):
            if key in s:
                body.append("if %s and not (v %s %s): return False" % (num, op, self.const(s[key])))
        if "minLength" in s:
            body.append("if t is str and len(v) < %d: return False" % s["minLength"])
        if "maxLength" in s:
            body.append("if t is str and len(v) > %d: return False" % s["maxLength"])
        if "pattern" in s:
            body.append("if t is str and not %s(v): return False" % self.const(re.compile(s["pattern"]).search))
        body += self.object_lines(s, file)
        body += self.array_lines(s, file)
        for sub in s.get("allOf", []):
            body.append("if not %s(v): return False" % self.node(sub, file))
        if "anyOf" in s:
            body.append("if not (%s): return False" % " or ".join("%s(v)" % self.node(x, file) for x in s["anyOf"]))
        if "oneOf" in s:
            body.append("if (%s) != 1: return False" % " + ".join("bool(%s(v))" % self.node(x, file) for x in s["oneOf"]))
        if "not" in s:
            body.append("if %s(v): return False" % self.node(s["not"], file))
        if "if" in s:
            then = self.node(s["then"], file) if "then" in s else "_true"
            other = self.node(s["else"], file) if "else" in s else "_true"
            body.append("if not (%s(v) if %s(v) else %s(v)): return False" % (then, self.node(s["if"], file), other))
        src = "def %s(v):\n    t = type(v)\n" % name + "".join("    %s\n" % l for l in body) + "    return True\n"
        exec(compile(src, "<forklab_agent schema %s>" % file, "exec"), self.ns)
        return name

    def object_lines(self, s, file):
        props = s.get("properties", {})
        required = s.get("required", [])
        extra = s.get("additionalProperties", True)
        names = s.get("propertyNames")
        lo, hi = s.get("minProperties"), s.get("maxProperties")
        if not (props or required or extra is not True or names is not None or lo is not None or hi is not None):
            return []
        out = ["if t is dict:"]
        for k in required:
            out.append("    if %r not in v: return False" % k)
        if hi is not None:
            out.append("    if len(v) > %d: return False" % hi)
        if lo is not None:
            out.append("    if len(v) < %d: return False" % lo)
        # The functions of the properties by name, looked up on the first
        # call, when every function exists (a recursive schema's too).
        table = self.const({k: self.node(x, file) for k, x in props.items()})
        funcs = self.const({})
        if extra is True:
            extra_fn = None
        elif extra is False:
            extra_fn = False
        else:
            extra_fn = self.node(extra, file)
        names_fn = self.node(names, file) if names is not None else None
        out.append("    if not %s: %s.update((k, globals()[f]) for k, f in %s.items())" % (funcs, funcs, table))
        out.append("    for k, x in v.items():")
        if names_fn:
            out.append("        if not %s(k): return False" % names_fn)
        out.append("        c = %s.get(k)" % funcs)
        if extra_fn is False:
            out.append("        if c is None: return False")
        elif extra_fn:
            out.append("        if c is None: c = %s" % extra_fn)
        else:
            out.append("        if c is None: continue")
        out.append("        if not c(x): return False")
        return out

    def array_lines(self, s, file):
        items = s.get("items")
        lo, hi, unique = s.get("minItems"), s.get("maxItems"), s.get("uniqueItems", False)
        if items is None and lo is None and hi is None and not unique:
            return []
        out = ["if t is list:"]
        if lo is not None:
            out.append("    if len(v) < %d: return False" % lo)
        if hi is not None:
            out.append("    if len(v) > %d: return False" % hi)
        if unique:
            out.append("    if not _unique(v): return False")
        if items is not None:
            fn = self.node(items, file)
            out.append("    for x in v:")
            out.append("        if not %s(x): return False" % fn)
        return out


def _unique(v):
    return all(not equal(v[i], v[j]) for i in range(len(v)) for j in range(i))


def non_finite(v, path=""):
    """The path of the first float in v that is NaN or infinite (which JSON
    cannot hold), or None."""
    if isinstance(v, float):
        return None if math.isfinite(v) else path or "the value"
    if isinstance(v, dict):
        for k, x in v.items():
            r = non_finite(x, at(path, k))
            if r:
                return r
    elif isinstance(v, (list, tuple)):
        for i, x in enumerate(v):
            r = non_finite(x, at(path, i))
            if r:
                return r
    return None
