"""forklab_agent: put a Python agent in forklab's fork lab.

An agent is a world declaration and the functions start and branch (and,
optionally, fold); this package speaks forklab-agent/1 for them
(docs/agent-protocol.md): JSON-RPC 2.0 over stdin and stdout, one JSON
value per line, batches, initialize and shutdown, errors with the
protocol's codes, exact integers. It checks the declaration when the Agent
is made (before any seed runs) and every reply against the protocol's
schemas and the declaration before it is sent, naming the method and the
field. Standard library only. See docs/sdk-python.md.

    from forklab_agent import Agent, BadCheckpoint

    agent = Agent(DECLARATION, start=start, branch=branch, volatile=["forks[*].checkpoint.saved_at"])
    if __name__ == "__main__":
        agent.serve()

Importing this package makes standard output the protocol's: from then on
print() and anything else written to file descriptor 1 (a library's banner,
a subprocess's output) goes to standard error, where forklab keeps the
agent's logs, and only the replies go to the real stdout.
"""
import json
import os
import sys
import traceback

from . import declaration as _decl
from .declaration import DeclarationError
from .schema import Registry, kind, non_finite

__all__ = ["Agent", "AgentError", "InvalidParams", "BadCheckpoint", "RunFailed", "DeclarationError",
           "ProtocolError", "PROTOCOL", "__version__"]
__version__ = "0.1.0"

PROTOCOL = "forklab-agent/1"

# The protocol's error codes (docs/agent-protocol.md, "Errors").
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RUN_FAILED = -32000
BAD_CHECKPOINT = -32001
UNSUPPORTED_PROTOCOL = -32002


class AgentError(Exception):
    """An error reply: raise it (or a subclass) from start, branch or fold
    to answer the request with code, message and optional data. forklab
    retries -32000 and -32603, not the others, unless data says
    {"retryable": …}."""
    code = INTERNAL_ERROR

    def __init__(self, message, data=None, code=None):
        super().__init__(message)
        self.message, self.data = str(message), data
        if code is not None:
            self.code = code

    def error(self):
        e = {"code": self.code, "message": self.message}
        if self.data is not None:
            e["data"] = self.data
        return e


class InvalidParams(AgentError):
    """-32602: a param missing, mistyped or refused (not retried)."""
    code = INVALID_PARAMS


class BadCheckpoint(AgentError):
    """-32001: the checkpoint is not one this agent (version) wrote (not retried)."""
    code = BAD_CHECKPOINT


class RunFailed(AgentError):
    """-32000: the run or branch failed in a way worth retrying (a model API
    error, a timeout of a tool, rate limiting); retryable=False says it is
    not."""
    code = RUN_FAILED

    def __init__(self, message, retryable=True, data=None):
        if not retryable:
            data = dict(data or {}, retryable=False)
        super().__init__(message, data)


class ProtocolError(ValueError):
    """An Agent that cannot speak the protocol as made: a capability the
    schema does not know, a method that cannot be added."""


def _take_stdout():
    """Keeps file descriptor 1 for the protocol's replies and points it (and
    sys.stdout) at standard error, so that nothing else reaches forklab's
    end of the pipe. Returns the binary stream the replies go to."""
    try:
        sys.stdout.flush()
    except (AttributeError, ValueError, OSError):
        pass
    try:
        fd = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no descriptor 1 or 2: leave things as they are
        return sys.stdout.buffer if hasattr(sys.stdout, "buffer") else None
    sys.stdout = sys.stderr
    return os.fdopen(fd, "wb")


_replies = _take_stdout()
_schemas = Registry()
# For the results the declaration checks (declaration.RESULT_CHECKS): those
# checks hold every declared value and cost to its field, more strictly
# than the schema's generic values and cost, which are not checked again.
_declared = Registry(trusted=[("common.schema.json", "/$defs/values"), ("common.schema.json", "/$defs/cost")])

# Methods the SDK answers itself; start and branch are required of the user.
_OWN = ("initialize", "shutdown")


def _log(msg):
    print("forklab_agent: " + msg, file=sys.stderr, flush=True)


class Agent:
    """An agent: its world declaration and the functions that serve it.

    declaration is the world declaration (docs/agent-protocol.md, "The
    world declaration") as a dict; start, branch and fold take a request's
    params (a dict, already checked against the protocol's schema) and
    return its result; fold is optional (it declares capabilities.fold).
    volatile lists JSON paths into start's result that change from run to
    run and mean nothing (ids, timestamps): forklab agent check's
    repeatability comparison ignores them (added to the declaration's own
    "volatile"). batch declares capabilities.batch: forklab may then send
    up to that many requests in one line. methods adds further optional
    methods by name (runs, load, inspect, …), each a function of params,
    and capabilities the capabilities announcing them ({"runs": True}).
    name and version name the program in initialize (default: the
    script's file name). check_replies=False skips the checks of replies.

    Raises DeclarationError, naming the field, for a declaration that
    breaks the protocol's schema or rules, and ProtocolError for
    capabilities or methods it cannot announce.
    """

    def __init__(self, declaration, start, branch, fold=None, *, volatile=None, batch=None, methods=None,
                 capabilities=None, name=None, version=None, check_replies=True):
        if not isinstance(declaration, dict):
            raise DeclarationError("declaration: must be an object (a dict), got %s" % kind(declaration))
        if volatile:
            if isinstance(volatile, str):
                volatile = [volatile]
            merged = list(declaration.get("volatile", []))
            merged += [p for p in volatile if p not in merged]
            declaration = dict(declaration, volatile=merged)
        problem = _schemas.validator("declaration")(declaration, "declaration")
        if problem:
            raise DeclarationError(problem)
        _decl.rules(declaration)
        self.declaration = declaration
        self.methods = {"start": start, "branch": branch}
        caps = {}
        if fold is not None:
            self.methods["fold"] = fold
            caps["fold"] = True
        if batch is not None:
            caps["batch"] = batch
        for m, f in (methods or {}).items():
            if m in _OWN or m in ("start", "branch") or (m == "fold" and fold is not None):
                raise ProtocolError("methods: %r is not an optional method to add (give start, branch and fold as arguments)" % m)
            self.methods[m] = f
        for m, f in self.methods.items():
            if not callable(f):
                raise ProtocolError("%s: must be a function of the request's params, got %s" % (m, kind(f)))
        caps.update(capabilities or {})
        if name is None:
            name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] not in ("", "-c", "-") else "python agent"
        self.initialize_result = {"protocol_version": PROTOCOL}
        if name:
            self.initialize_result["agent"] = {"name": name} if version is None else {"name": name, "version": str(version)}
        self.initialize_result["world"] = declaration
        self.initialize_result["capabilities"] = caps
        problem = _schemas.validator("initialize.result")(self.initialize_result, "initialize result")
        if problem:
            raise ProtocolError(problem)
        self.check_replies = check_replies
        self._arms = self._allowed_arms()
        self._declared_params = {p["name"]: p for p in declaration.get("params", [])}
        self._params = {m: _schemas.validator(m + ".params") for m in self.methods if _schemas.has(m + ".params")}
        self._results = {m: (_declared if m in _decl.RESULT_CHECKS else _schemas).validator(m + ".result")
                         for m in self.methods if _schemas.has(m + ".result")}

    def _allowed_arms(self):
        """Arm -> the interventions it may carry, from the declaration."""
        ivs = {iv["arm"]: iv["action"] for iv in self.declaration.get("interventions", [])}
        arms = {"off": {None}, "aa": {None}}
        if "on" in ivs:
            arms["on"] = {ivs["on"]}
            arms["policy"] = {ivs["on"], None}
        if "placebo" in ivs:
            arms["placebo"] = {ivs["placebo"]}
        return arms

    # -- one request -------------------------------------------------------

    def call(self, method, params):
        """Answers one request as serve would, and returns its result or
        raises its AgentError: for an agent's own tests."""
        res = self._answer(method, params)
        if "error" in res:
            e = res["error"]
            raise AgentError(e["message"], e.get("data"), e["code"])
        return res["result"]

    def _answer(self, method, params):
        """{"result": …} or {"error": …} for one request's method and params."""
        try:
            if method == "initialize":
                return {"result": self._initialize(params)}
            if method == "shutdown":
                return {"result": {}}
            fn = self.methods.get(method)
            if fn is None:
                raise AgentError("method %r not found%s" % (method, "" if method != "fold" else ": this agent declares no fold"),
                                 code=METHOD_NOT_FOUND)
            self._check_params(method, params)
            result = fn(params)
        except AgentError as e:
            return {"error": e.error()}
        except Exception as e:  # the agent's own failure: say so, keep serving
            _log("%s raised %s" % (method, "".join(traceback.format_exception(type(e), e, e.__traceback__)).rstrip()))
            return {"error": {"code": INTERNAL_ERROR, "message": "%s: %s: %s" % (method, type(e).__name__, e)}}
        if self.check_replies:
            problem = self._check_result(method, params, result)
            if problem:
                msg = "the %s reply breaks forklab-agent/1, caught by forklab_agent before it was sent: %s" % (method, problem)
                _log(msg)
                return {"error": {"code": INTERNAL_ERROR, "message": msg, "data": {"retryable": False}}}
        return {"result": result}

    def _initialize(self, params):
        versions = params.get("protocol_versions") if isinstance(params, dict) else None
        if not isinstance(versions, list):
            raise InvalidParams("params.protocol_versions must be a list of protocol versions")
        if PROTOCOL not in versions:
            raise AgentError("this agent speaks %s only" % PROTOCOL, {"supported": [PROTOCOL]}, UNSUPPORTED_PROTOCOL)
        return self.initialize_result

    def _check_params(self, method, params):
        """Refuses params that break the method's schema or the
        declaration (-32602, naming the param)."""
        check = self._params.get(method)
        if check:
            problem = check(params, "params")
            if problem:
                raise InvalidParams(problem)
        elif not isinstance(params, dict):
            raise InvalidParams("params: must be an object, got %s" % kind(params))
        if method == "start":
            steps = params["fork_steps"]
            if any(b <= a for a, b in zip(steps, steps[1:])):
                raise InvalidParams("params.fork_steps must ascend without repeats, got %s" % steps)
            declared = self._declared_params
            for k, v in params["params"].items():
                p = declared.get(k)
                if p is None:
                    raise InvalidParams("params.params.%s: world %s declares no such parameter (its parameters: %s)"
                                        % (k, self.declaration["name"], ", ".join(declared) or "none"))
                problem = _decl.param_value(p, v)
                if problem:
                    raise InvalidParams("params.params.%s %s" % (k, problem))
        elif method == "branch":
            for i, b in enumerate(params["branches"]):
                allowed = self._arms.get(b["arm"])
                if allowed is None:
                    raise InvalidParams("params.branches[%d].arm: world %s declares no intervention for arm %s (its arms: %s)"
                                        % (i, self.declaration["name"], b["arm"], ", ".join(self._arms)))
                if b["intervention"] not in allowed:
                    raise InvalidParams("params.branches[%d].intervention: %s for arm %s; world %s declares %s"
                                        % (i, json.dumps(b["intervention"]), b["arm"], self.declaration["name"],
                                           " or ".join(json.dumps(x) for x in sorted(allowed, key=str))))

    def _check_result(self, method, params, result):
        """What is wrong with a result, or None: the declaration's checks
        (which also turn whole floats of int fields into ints), then the
        method's schema."""
        check = _decl.RESULT_CHECKS.get(method)
        if check:
            problem = check(self.declaration, params, result)
            if problem:
                return problem
        schema = self._results.get(method)
        if schema:
            problem = schema(result, "result")
            if problem:
                return problem
        return None

    def handle(self, req):
        """Answers one request object; returns (response, shut down?)."""
        rid = req.get("id") if isinstance(req, dict) else None
        if not isinstance(rid, (int, str)) or isinstance(rid, bool):
            rid = None
        if not isinstance(req, dict) or req.get("jsonrpc") != "2.0" or not isinstance(req.get("method"), str) or rid is None:
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": INVALID_REQUEST, "message": "not a JSON-RPC 2.0 request with an id"}}, False
        reply = {"jsonrpc": "2.0", "id": rid}
        reply.update(self._answer(req["method"], req.get("params", {})))
        return reply, req["method"] == "shutdown" and "result" in reply

    # -- the transport -----------------------------------------------------

    def serve(self, stdin=None, stdout=None):
        """Serves requests from stdin (default: the process's) until
        shutdown or the end of stdin, writing one reply line per request
        line to stdout (default: the protocol's, the real standard output)
        and flushing it. Returns then; the script should end."""
        stdin = stdin if stdin is not None else sys.stdin.buffer
        out = stdout if stdout is not None else _replies
        encode = json.JSONEncoder(separators=(",", ":"), allow_nan=False, check_circular=False).encode
        for raw in stdin:
            if not raw.strip():
                continue
            try:
                msg = json.loads(raw)
            except ValueError as e:
                replies, done = {"jsonrpc": "2.0", "id": None, "error": {"code": PARSE_ERROR, "message": "not JSON: %s" % e}}, False
            else:
                if isinstance(msg, list):  # a batch (capabilities.batch)
                    if not msg:
                        replies, done = {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": "an empty batch"}}, False
                    else:
                        answered = [self.handle(m) for m in msg]
                        replies, done = [r for r, _ in answered], any(d for _, d in answered)
                else:
                    replies, done = self.handle(msg)
            if isinstance(replies, list):
                line = "[" + ",".join(_encode(encode, r) for r in replies) + "]"
            else:
                line = _encode(encode, replies)
            out.write(line.encode("utf-8") + b"\n")
            out.flush()
            if done:
                return


def _encode(encode, reply):
    """One response as JSON; a result JSON cannot hold (an object of
    another type, a NaN the checks were told not to see) becomes an error
    response naming the problem."""
    try:
        return encode(reply)
    except (TypeError, ValueError) as e:
        path = non_finite(reply.get("result"), "result")
        if path:
            e = "%s is NaN or infinite, which JSON does not allow: write null or a string" % path
        msg = "the reply cannot be written as JSON: %s" % e
        _log(msg)
        return encode({"jsonrpc": "2.0", "id": reply.get("id"),
                       "error": {"code": INTERNAL_ERROR, "message": msg, "data": {"retryable": False}}})
