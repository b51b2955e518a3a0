#!/usr/bin/env python3
"""examples/agents/seed_core.py with faults, for forklab's tests.

    faulty_agent.py [--crash 7,8] [--hang 13] [--garbage 21] [--drop-feature NAME] [--coin] [--count FILE]
                    [--wrong-id] [--notification] [--linger] [--flaky-decl FILE] [--over-flip] [--no-batch]
                    [--score ok|nan|out|missing|against] [--spew]

--crash, --hang and --garbage name seeds modulo 50: a start request of such a
seed makes the process exit at once (saying so, with its pid, on stderr), a
branch request of it makes the process hang, and a start request of it makes
the process print a line that is not JSON. --drop-feature leaves a declared
feature out of every start reply; --coin makes branch outcomes a coin flip
without declaring the agent nondeterministic. --count appends "METHOD SEED"
to FILE for every start and branch request received (and "initialize -" for
every initialize), so tests can count what an agent was asked.

Protocol mistakes: --wrong-id answers every start with the request's id plus
100; --notification writes a JSON-RPC notification line before every start
reply; --linger answers shutdown but does not exit; --flaky-decl counts the
processes started in FILE and has every process after the first declare
world version "1.1" instead of "1"; --over-flip reports the on arm's branch
of a run that is already over as the opposite of the off arm's; --no-batch
declares no batch capability.

Scores: --score declares a graded outcome in [0, 1] with threshold 1 and
reports each branch's score (1 on a success, 0 otherwise; ok), or a bare
NaN (nan, as Python's json.dumps writes float("nan")), 1.5 (out), none
(missing), or success false beside score 1 (against) on seeds 4 and 9
modulo 50, and ok elsewhere.

--spew writes lines to stderr without pause, from the moment the process
starts, as a chatty framework logging at debug level does.
"""
import argparse, importlib.util, json, os, random, sys, threading, time

# The protocol's stdout, kept before seed_core's SDK (forklab_agent) takes
# file descriptor 1 for its own replies: this agent writes its replies, and
# its garbage, itself, so that it can break the protocol.
out = os.fdopen(os.dup(1), "w")
here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("seed_core", os.path.join(here, "..", "..", "examples", "agents", "seed_core.py"))
core = importlib.util.module_from_spec(spec)
spec.loader.exec_module(core)
core.agent.check_replies = False  # its malformed replies go out as they are

ap = argparse.ArgumentParser()
seeds = lambda s: {int(x) for x in s.split(",") if x}
ap.add_argument("--crash", type=seeds, default=set())
ap.add_argument("--hang", type=seeds, default=set())
ap.add_argument("--garbage", type=seeds, default=set())
ap.add_argument("--drop-feature", default="")
ap.add_argument("--coin", action="store_true")
ap.add_argument("--count", default="")
ap.add_argument("--wrong-id", action="store_true")
ap.add_argument("--notification", action="store_true")
ap.add_argument("--linger", action="store_true")
ap.add_argument("--flaky-decl", default="")
ap.add_argument("--over-flip", action="store_true")
ap.add_argument("--no-batch", action="store_true")
ap.add_argument("--score", choices=["ok", "nan", "out", "missing", "against"], default="")
ap.add_argument("--spew", action="store_true")
a = ap.parse_args()

if a.spew:
    def spew():
        line = ("faulty_agent: debug: %d " % os.getpid()) + "x" * 200 + "\n"
        while True:
            os.write(2, line.encode() * 64)
    threading.Thread(target=spew, daemon=True).start()

plain_start, plain_branch, plain_handle = core.start, core.branch, core.agent.handle


def initialize(r):
    r = dict(r)
    if a.count:
        with open(a.count, "a") as f:
            f.write("initialize -\n")
    if a.no_batch:
        r["capabilities"] = {"fold": True}
    if a.score:
        r["world"] = dict(r["world"], score={"min": 0, "max": 1, "threshold": 1, "unit": "run", "description": "1 on a success"})
    if a.flaky_decl:
        try:
            with open(a.flaky_decl) as f:
                n = int(f.read() or 0)
        except FileNotFoundError:
            n = 0
        with open(a.flaky_decl, "w") as f:
            f.write(str(n + 1))
        if n > 0:
            r["world"] = dict(r["world"], version="1.1")
    return r


def handle(req):
    reply, done = plain_handle(req)
    if isinstance(req, dict) and req.get("method") == "initialize" and "result" in reply:
        reply["result"] = initialize(reply["result"])
    if a.wrong_id and isinstance(req, dict) and req.get("method") == "start" and isinstance(reply.get("id"), int):
        reply["id"] += 100
    return reply, done


def start(p):
    seed = p.get("seed", 0)
    if a.count:
        with open(a.count, "a") as f:
            f.write("start %s\n" % seed)
    if isinstance(seed, int) and seed % 50 in a.crash:
        print("faulty_agent: crashing on seed %d (pid %d)" % (seed, os.getpid()), file=sys.stderr, flush=True)
        os._exit(1)
    if isinstance(seed, int) and seed % 50 in a.garbage:
        print("faulty_agent: garbage on seed %d" % seed, file=sys.stderr, flush=True)
        out.write("Traceback (most recent call last): seed %d\n" % seed)
        out.flush()
    r = plain_start(p)
    if a.notification:
        out.write('{"jsonrpc":"2.0","method":"progress","params":{"seed":%d}}\n' % seed)
        out.flush()
    if a.drop_feature:
        for f in r["forks"]:
            f["features"].pop(a.drop_feature, None)
    return r


def branch(p):
    seed = p.get("seed", 0)
    if a.count:
        with open(a.count, "a") as f:
            f.write("branch %s\n" % seed)
    if isinstance(seed, int) and seed % 50 in a.hang:
        print("faulty_agent: hanging on seed %d" % seed, file=sys.stderr, flush=True)
        time.sleep(3600)
    r = plain_branch(p)
    st = p["checkpoint"]["state"]
    if a.over_flip and (st["declared"] or st["steps"] >= st["budget"]):
        off = next(b["success"] for b, q in zip(r["branches"], p["branches"]) if q["arm"] == "off")
        for b, q in zip(r["branches"], p["branches"]):
            if q["arm"] == "on":
                b["success"] = not off
    if a.coin:
        for b in r["branches"]:
            b["success"] = random.random() < 0.5
    if a.score:
        bad = isinstance(seed, int) and seed % 50 in (4, 9)
        for b in r["branches"]:
            if "success" not in b:
                continue
            b["score"] = 1.0 if b["success"] else 0.0
            if bad and a.score == "nan":
                b["score"] = float("nan")
            elif bad and a.score == "out":
                b["score"] = 1.5
            elif bad and a.score == "missing":
                del b["score"]
            elif bad and a.score == "against":
                b["success"], b["score"] = False, 1.0
    return r


def serve():
    """forklab-agent/1 as plainly as it goes: a reply line per request line."""
    for raw in sys.stdin.buffer:
        if not raw.strip():
            continue
        try:
            msg = json.loads(raw)
        except ValueError as e:
            reply, done = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "not JSON: %s" % e}}, False
        else:
            if isinstance(msg, list):
                pairs = [handle(m) for m in msg]
                reply, done = [r for r, _ in pairs], any(d for _, d in pairs)
            else:
                reply, done = handle(msg)
        out.write(json.dumps(reply, separators=(",", ":")) + "\n")
        out.flush()
        if done:
            return


core.agent.methods["start"] = start
core.agent.methods["branch"] = branch
serve()
if a.linger:
    print("faulty_agent: answered shutdown; lingering", file=sys.stderr, flush=True)
    time.sleep(3600)
