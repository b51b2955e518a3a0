"""Tests of forklab_agent: python3 -m unittest discover -s sdk/python/tests
(pipeline/lab/agentproc.TestPythonSDK runs them)."""
import io
import json
import os
import subprocess
import sys
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SDK = os.path.dirname(HERE)
sys.path.insert(0, SDK)

import forklab_agent  # noqa: E402  (takes stdout: unittest reports on stderr)
from forklab_agent import Agent, AgentError, BadCheckpoint, DeclarationError, ProtocolError  # noqa: E402
from forklab_agent.schema import KEYWORDS, Registry  # noqa: E402

COIN = {"name": "coin", "version": "1",
        "task": [{"name": "flips", "type": "int"}],
        "features": [{"name": "heads_so_far", "type": "int"}, {"name": "rate", "type": "float", "nullable": True}],
        "hidden": [{"name": "flawed", "type": "bool"}], "fault_flag": "flawed",
        "actions": ["no_tool", "flip", "reweigh"],
        "interventions": [{"arm": "on", "action": "reweigh"}],
        "cost": {"fields": ["steps"]}}


def start(p):
    forks = [{"fork_step": k, "over": False, "checkpoint": {"seed": p["seed"], "k": k},
              "features": {"heads_so_far": k // 2, "rate": None}, "hidden": {"flawed": p["seed"] % 2 == 0},
              "cost": {"steps": k}} for k in p["fork_steps"]]
    return {"task": {"flips": 4}, "forks": forks}


def branch(p):
    if not isinstance(p["checkpoint"], dict) or "k" not in p["checkpoint"]:
        raise BadCheckpoint("not a coin checkpoint")
    return {"branches": [{"success": b["intervention"] is not None, "cost": {"steps": 1}} for b in p["branches"]]}


def coin(**kw):
    return Agent(kw.pop("declaration", COIN), start=kw.pop("start", start), branch=kw.pop("branch", branch), **kw)


START = {"seed": 3, "fork_steps": [1, 2], "params": {}, "model": {"temperature": 0, "no_tool": 0.5}}
CP = {"seed": 3, "k": 2}
BRANCH = {"seed": 3, "fork_step": 2, "checkpoint": CP, "sweep_id": "s", "branches": [
    {"arm": "off", "intervention": None, "replica": 0, "noise_key": "0123456789abcdef", "branch_id": "s/3/2/off/0"},
    {"arm": "on", "intervention": "reweigh", "replica": 0, "noise_key": "fedcba9876543210", "branch_id": "s/3/2/on/0"}]}


class DeclarationTest(unittest.TestCase):
    """A malformed declaration is an error naming the field, when the Agent
    is made: before any request, let alone a seed."""

    def refused(self, decl, want, **kw):
        with self.assertRaises(DeclarationError) as cm:
            coin(declaration=decl, **kw)
        self.assertIn(want, str(cm.exception))

    def test_schema(self):
        self.refused(dict(COIN, features=[{"name": "x", "type": "integer"}]),
                     'declaration.features[0].type: must be one of "bool", "int", "float", "enum", got "integer"')
        self.refused({k: v for k, v in COIN.items() if k != "cost"}, "declaration: missing property 'cost'")
        self.refused(dict(COIN, feautres=[]), "declaration: unknown key 'feautres'")
        self.refused(dict(COIN, name="Coin"), 'declaration.name: "Coin" does not match')
        self.refused(dict(COIN, params=[{"name": "p", "type": "int"}]), "declaration.params[0]: missing property 'default'")

    def test_rules(self):
        self.refused(dict(COIN, fault_flag="heads"), "declaration.fault_flag: 'heads' must name a bool hidden field")
        self.refused(dict(COIN, actions=["flip", "reweigh"]), 'declaration.actions[0]: must be "no_tool"')
        self.refused(dict(COIN, interventions=[{"arm": "on", "action": "pray"}]), "declaration.interventions[0].action: 'pray' is not among the actions")
        self.refused(dict(COIN, cost={"fields": ["usd", "steps"]}), "declaration.cost.fields: list each field once, in the order steps, tokens, usd, seconds")
        self.refused(dict(COIN, features=COIN["features"] + [{"name": "rate", "type": "int"}]), "declaration.features[2].name: 'rate' is declared twice (also features[1])")
        self.refused(dict(COIN, params=[{"name": "k", "type": "int", "default": 9, "min": 1, "max": 5}]), "declaration.params[0].default: 9 is outside [1, 5]")
        self.refused(dict(COIN, params=[{"name": "k", "type": "enum", "default": "a"}]), "declaration.params[0]: an enum lists its values")

    def test_volatile(self):
        a = coin(volatile=["forks[*].checkpoint.ts"])
        self.assertEqual(a.declaration["volatile"], ["forks[*].checkpoint.ts"])
        self.assertNotIn("volatile", COIN)
        a = coin(declaration=dict(COIN, volatile=["task.id"]), volatile="forks[0].checkpoint.*.id")
        self.assertEqual(a.declaration["volatile"], ["task.id", "forks[0].checkpoint.*.id"])
        self.refused(COIN, "declaration.volatile[0]: \"forks[x].ts\" is not a path", volatile=["forks[x].ts"])
        self.refused(COIN, "declaration.volatile[0]: \"checkpoint.ts\": a path into start's result begins with task or forks", volatile=["checkpoint.ts"])

    def test_capabilities_and_methods(self):
        with self.assertRaises(ProtocolError) as cm:
            coin(capabilities={"telepathy": True})
        self.assertIn("initialize result.capabilities: unknown key 'telepathy'", str(cm.exception))
        with self.assertRaises(ProtocolError):
            coin(methods={"start": start})
        with self.assertRaises(ProtocolError):
            coin(methods={"echo": "not a function"})


class RequestTest(unittest.TestCase):
    def test_answers(self):
        a = coin(name="coin.py", version=2)
        init = a.call("initialize", {"protocol_versions": ["forklab-agent/1"], "client": {"name": "t", "version": "1"}})
        self.assertEqual(list(init), ["protocol_version", "agent", "world", "capabilities"])
        self.assertEqual(init["agent"], {"name": "coin.py", "version": "2"})
        self.assertEqual(init["capabilities"], {})
        self.assertEqual(a.call("start", START)["forks"][1]["checkpoint"], CP)
        self.assertEqual([b["success"] for b in a.call("branch", BRANCH)["branches"]], [False, True])
        self.assertEqual(a.call("shutdown", {}), {})

    def refused(self, a, method, params, code, want):
        with self.assertRaises(AgentError) as cm:
            a.call(method, params)
        self.assertEqual(cm.exception.code, code, cm.exception.message)
        self.assertIn(want, cm.exception.message)
        return cm.exception

    def test_params(self):
        a = coin()
        self.refused(a, "initialize", {"protocol_versions": ["forklab-agent/999"]}, -32002, "speaks forklab-agent/1 only")
        self.refused(a, "start", dict(START, seed="seven"), -32602, "params.seed: must be an integer, got a string")
        self.refused(a, "start", {k: v for k, v in START.items() if k != "fork_steps"}, -32602, "params: missing property 'fork_steps'")
        self.refused(a, "start", dict(START, fork_steps=[2, 1]), -32602, "params.fork_steps must ascend")
        self.refused(a, "start", dict(START, params={"k": 1}), -32602, "params.params.k: world coin declares no such parameter")
        bad = json.loads(json.dumps(BRANCH))
        bad["branches"][1]["intervention"] = "no_such_action_xyz"
        self.refused(a, "branch", bad, -32602, 'params.branches[1].intervention: "no_such_action_xyz" for arm on; world coin declares "reweigh"')
        bad["branches"][1]["arm"] = "placebo"
        self.refused(a, "branch", bad, -32602, "params.branches[1].arm: world coin declares no intervention for arm placebo")
        self.refused(a, "branch", dict(BRANCH, checkpoint={"forged": True}), -32001, "not a coin checkpoint")
        self.refused(a, "no_such_method", {}, -32601, "method 'no_such_method' not found")
        self.refused(a, "fold", {"stream": "s", "offset": "o", "events": []}, -32601, "declares no fold")

    def test_replies_checked(self):
        """A reply that breaks the schema or the declaration is caught here,
        naming the method and the field, and answered with a non-retryable
        internal error instead."""
        def broken(edit):
            def f(p):
                r = start(p)
                edit(r)
                return r
            return coin(start=f)

        cases = [
            (lambda r: r["forks"][1]["features"].pop("heads_so_far"), "result.forks[1].features.heads_so_far is missing: the declaration lists it (int)"),
            (lambda r: r["forks"][0]["features"].update(heads_so_far="2"), "result.forks[0].features.heads_so_far must be an integer, got a string"),
            (lambda r: r["forks"][0]["features"].update(heads_so_far=2.5), "result.forks[0].features.heads_so_far must be an integer, got 2.5"),
            (lambda r: r["forks"][0]["features"].update(heads_so_far=2 ** 60), "within ±2^53"),
            (lambda r: r["forks"][0]["hidden"].update(flawed=None), "result.forks[0].hidden.flawed is null"),
            (lambda r: r["forks"][0]["features"].update(feautres=1), "result.forks[0].features.feautres is not declared"),
            (lambda r: r["forks"][0].update(feautres={}), "result.forks[0]: unknown key 'feautres'"),
            (lambda r: r["forks"][0]["cost"].update(tokens=3), "result.forks[0].cost.tokens is not among the declared cost fields (steps)"),
            (lambda r: r["forks"][0]["cost"].update(steps=-1), "result.forks[0].cost.steps must be an integer in [0, 2^53], got -1"),
            (lambda r: r["forks"][0].update(checkpoint=None), "result.forks[0].checkpoint: must not be null"),
            (lambda r: r["forks"][0].update(fork_step=7), "result.forks[0].fork_step is 7, but fork step 1 was asked there"),
            (lambda r: r["forks"].pop(), "result.forks has 1 entries for 2 fork steps asked"),
            (lambda r: r["task"].update(flips=True), "result.task.flips must be an integer, got a boolean"),
        ]
        for edit, want in cases:
            e = RequestTest.refused(self, broken(edit), "start", START, -32603, want)
            self.assertIn("the start reply breaks forklab-agent/1, caught by forklab_agent before it was sent: ", e.message)
            self.assertEqual(e.data, {"retryable": False})

        def nan_details(p):
            r = branch(p)
            r["branches"][1]["details"] = {"scores": [1.0, float("nan")]}
            return r
        a = coin(branch=nan_details)
        out = io.BytesIO()
        a.serve(stdin=[json.dumps({"jsonrpc": "2.0", "id": 7, "method": "branch", "params": BRANCH}).encode()], stdout=out)
        reply = json.loads(out.getvalue())
        self.assertEqual(reply["id"], 7)
        self.assertIn("result.branches[1].details.scores[1] is NaN or infinite", reply["error"]["message"])

        def extra_branch(p):
            r = branch(p)
            r["branches"].append(r["branches"][0])
            return r
        RequestTest.refused(self, coin(branch=extra_branch), "branch", BRANCH, -32603, "the branch reply breaks forklab-agent/1, caught by forklab_agent before it was sent: result.branches has 3 entries for 2 branches asked")

    def test_whole_floats(self):
        """Python writes every float with a point; a whole float of an int
        field is sent as the integer forklab wants."""
        def floats(p):
            r = start(p)
            r["task"]["flips"] = 4.0
            r["forks"][0]["cost"]["steps"] = 1.0
            return r
        r = coin(start=floats).call("start", START)
        self.assertIs(type(r["task"]["flips"]), int)
        self.assertIs(type(r["forks"][0]["cost"]["steps"]), int)

    def test_bug_is_an_internal_error(self):
        def boom(p):
            raise KeyError("state")
        e = RequestTest.refused(self, coin(start=boom), "start", START, -32603, "start: KeyError: 'state'")
        self.assertIsNone(e.data)  # retried by forklab: -32603 is, by default

    def test_extra_methods(self):
        """Further optional methods are functions by name (issue 23's runs,
        load and inspect among them); a result of a method whose shape the
        declaration fixes is checked like start's."""
        a = coin(methods={"echo": lambda p: {"echo": p}, "inspect": lambda p: {"over": False, "features": {"heads_so_far": 1}, "hidden": {"flawed": True}, "cost": {"steps": 1}}})
        self.assertEqual(a.call("echo", {"x": 1}), {"echo": {"x": 1}})
        RequestTest.refused(self, a, "inspect", {"checkpoint": CP, "fork_step": 1}, -32603, "result.features.rate is missing")


class TransportTest(unittest.TestCase):
    """The agent as forklab runs it: a process, requests on stdin."""

    def run_agent(self, body, lines, env=None):
        script = textwrap.dedent('''
            import sys
            sys.path.insert(0, %r)
            print("a banner printed before the SDK is imported goes to stdout: avoid it")
            import forklab_agent
            print("a banner of a library imported after it")
            sys.path.insert(0, %r)
            from test_agent import COIN, start, branch
            ''' % (SDK, HERE)) + textwrap.dedent(body)
        p = subprocess.run([sys.executable, "-c", script], input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=60, env=env)
        return p

    def test_stdout_is_for_replies(self):
        body = '''
            import os
            def noisy(p):
                print("a stray print in start")
                os.system("echo a subprocess writes to its stdout")
                return start(p)
            forklab_agent.Agent(COIN, start=noisy, branch=branch, batch=8).serve()
            print("after serve")
            '''
        big = 2 ** 63 - 2
        lines = [json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocol_versions": ["forklab-agent/1"], "client": {"name": "t", "version": "1"}}}),
                 "",
                 '{"jsonrpc":"2.0","id":2,',
                 json.dumps([{"jsonrpc": "2.0", "id": 3, "method": "start", "params": dict(START, seed=big)},
                             {"jsonrpc": "2.0", "id": 4, "method": "start", "params": dict(START, seed=-1)}]),
                 "[]",
                 json.dumps({"jsonrpc": "2.0", "method": "start", "params": START}),
                 json.dumps({"jsonrpc": "2.0", "id": 5, "method": "shutdown", "params": {}}),
                 json.dumps({"jsonrpc": "2.0", "id": 6, "method": "start", "params": START})]
        p = self.run_agent(body, lines)
        self.assertEqual(p.returncode, 0, p.stderr)
        out = p.stdout.splitlines()
        self.assertEqual(out[0], "a banner printed before the SDK is imported goes to stdout: avoid it")
        replies = [json.loads(l) for l in out[1:]]
        self.assertEqual(len(replies), 6, out)
        self.assertEqual(replies[0]["id"], 1)
        self.assertEqual(replies[1], {"jsonrpc": "2.0", "id": None, "error": replies[1]["error"]})
        self.assertEqual(replies[1]["error"]["code"], -32700)
        self.assertIsInstance(replies[2], list)
        self.assertEqual(replies[2][0]["result"]["forks"][0]["checkpoint"]["seed"], big)
        self.assertIn('"seed":9223372036854775806,', out[3])  # exactly, as an integer
        self.assertEqual(replies[2][1]["error"]["code"], -32602)
        self.assertEqual(replies[3]["error"]["code"], -32600)  # an empty batch
        self.assertEqual(replies[4]["error"]["code"], -32600)  # no id
        self.assertEqual(replies[5], {"jsonrpc": "2.0", "id": 5, "result": {}})
        for text in ("a banner of a library imported after it", "a stray print in start", "a subprocess writes to its stdout", "after serve"):
            self.assertIn(text, p.stderr)

    def test_eof_exits(self):
        p = self.run_agent("forklab_agent.Agent(COIN, start=start, branch=branch).serve()\n", [])
        self.assertEqual((p.returncode, p.stdout.splitlines()[1:]), (0, []))

    def test_bad_declaration_before_any_request(self):
        p = self.run_agent('forklab_agent.Agent(dict(COIN, fault_flag="nope"), start=start, branch=branch).serve()\n',
                           [json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocol_versions": ["forklab-agent/1"]}})])
        self.assertNotEqual(p.returncode, 0)
        self.assertEqual(p.stdout.splitlines()[1:], [])
        self.assertEqual(p.stderr.strip().splitlines()[-1],
                         "forklab_agent.declaration.DeclarationError: declaration.fault_flag: 'nope' must name a bool hidden field")


class SchemaTest(unittest.TestCase):
    def test_every_keyword_supported(self):
        """Every bundled schema compiles: a re-synced schema that uses a
        keyword the validator lacks fails here."""
        r = Registry()
        for name in r.names():
            r.validator(name)
        self.assertIn("start.result", r.names())
        self.assertIn("$ref", KEYWORDS)

    def test_fast_path_agrees(self):
        """The generated acceptance (schema.Accept) accepts exactly what the
        wording closures find nothing wrong with."""
        r = Registry()
        from forklab_agent.schema import Accept
        fast = Accept(r)
        good = start(START)
        samples = {"start.result": [good], "branch.params": [BRANCH], "start.params": [START], "declaration": [COIN],
                   "initialize.result": [coin().initialize_result], "response": [{"jsonrpc": "2.0", "id": 1, "result": {}}]}
        def variants(v):
            """v, and v with each place in turn replaced by other values."""
            yield v
            if isinstance(v, dict):
                for k in list(v):
                    for x in variants(v[k]):
                        yield dict(v, **{k: x})
                    yield {kk: vv for kk, vv in v.items() if kk != k}
                yield dict(v, unknown_key=1)
            elif isinstance(v, list):
                for i, item in enumerate(v):
                    for x in variants(item):
                        yield v[:i] + [x] + v[i + 1:]
                yield []
                yield v + v
            for other in (None, True, 0, -1, 2 ** 70, 1.5, "", "x", [], {}):
                yield other
        n = 0
        for name, values in samples.items():
            slow, accept = r.ref(name + ".schema.json", ""), fast.ref(name + ".schema.json", "")
            for v in values:
                for x in variants(v):
                    n += 1
                    self.assertEqual(accept(x), slow(x) is None, "%s: %s" % (name, json.dumps(x)[:300]))
        self.assertGreater(n, 1000)

    def test_messages(self):
        r = Registry()
        check = r.validator("response")
        self.assertIsNone(check({"jsonrpc": "2.0", "id": 1, "result": {}}))
        self.assertEqual(check({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "m"}}, "the line"),
                         "the line: must not be this: {\"required\":[\"error\"]}")
        self.assertEqual(r.validator("branch.params")(dict(BRANCH, branches=[dict(BRANCH["branches"][0], noise_key="xyz")]), "params"),
                         'params.branches[0].noise_key: "xyz" does not match ^[0-9a-f]{16}$')


if __name__ == "__main__":
    unittest.main()
