#!/usr/bin/env python3
"""A small forklab-agent/1 agent whose quirks the QUIRK_* variables turn on,
for the tests of agentproc's handling of agents that break the protocol.

A run is four coin flips (a fork step k is the run after k flips); it
succeeds with at least two heads. Quirks (SEEDS is a comma-separated list):

QUIRK_RECORD=FILE        append every request line received to FILE
QUIRK_INIT_SLEEP=SECS    sleep before answering initialize
QUIRK_STDERR_MB=N        write N MiB to stderr (lines "spew SEED I xxx…") before answering each start
QUIRK_INIT_STDERR=TEXT   write TEXT to stderr before answering initialize, in
                         QUIRK_INIT_STDERR_LINES lines (default 100)
QUIRK_MISSING=SEEDS      start leaves the feature "heads" out
QUIRK_EXTRA=SEEDS        start adds the unknown key "feautres" to each fork
QUIRK_NAN=SEEDS          start writes the feature "heads" as NaN
QUIRK_NOJSONRPC=SEEDS    the start reply has no "jsonrpc" key
QUIRK_GARBAGE=SEEDS      a line that is not JSON instead of the start reply
QUIRK_OVERFLIP=1         branches of a run that is over: arm "on" reports the opposite success
QUIRK_BATCH=N            declare batches of up to N requests
QUIRK_BATCH_DROP=1       a batch reply leaves out its last response
QUIRK_BATCH_NULL=1       every batch is refused with one error, id null
QUIRK_NONDET=1           declare "nondeterministic": true
QUIRK_TEXT=TEXT          the checkpoint holds TEXT (written raw, ensure_ascii off)
QUIRK_STAMP=1            the checkpoint holds a wall-clock saved_at and a list of
                         messages with random ids, as a framework's does
QUIRK_VOLATILE=PATHS     declare these volatile paths (comma-separated)
"""
import json, os, random, sys, time


def seeds(name):
    v = os.environ.get(name)
    return set(int(s) for s in v.split(",")) if v else set()


WORLD = {"name": "quirky", "version": "1",
         "features": [{"name": "heads", "type": "int"}],
         "hidden": [{"name": "flawed", "type": "bool"}], "fault_flag": "flawed",
         "interventions": [{"arm": "on", "action": "reweigh"}],
         "cost": {"fields": ["steps"]}}
if os.environ.get("QUIRK_NONDET"):
    WORLD["nondeterministic"] = True
if os.environ.get("QUIRK_VOLATILE"):
    WORLD["volatile"] = os.environ["QUIRK_VOLATILE"].split(",")
CAPS = {}
if os.environ.get("QUIRK_BATCH"):
    CAPS["batch"] = int(os.environ["QUIRK_BATCH"])


def flip(st, rng):
    st["heads"] += rng.random() < (0.2 if st["flawed"] else 0.6)
    st["steps"] += 1


def start(p):
    seed = p["seed"]
    rng = random.Random(seed)
    st = {"flawed": rng.random() < 0.5, "heads": 0, "steps": 0, "seed": seed}
    if os.environ.get("QUIRK_TEXT"):
        st["text"] = os.environ["QUIRK_TEXT"]
    forks = []
    for k in p["fork_steps"]:
        while st["steps"] < min(k, 4):
            flip(st, rng)
        cp = dict(st)
        if os.environ.get("QUIRK_STAMP"):
            cp["saved_at"] = "%.9f" % time.time()
            cp["messages"] = [{"role": "user", "id": os.urandom(8).hex()}, {"role": "ai", "id": os.urandom(8).hex()}]
        f = {"fork_step": k, "over": st["steps"] >= 4, "checkpoint": cp,
             "features": {"heads": st["heads"]}, "hidden": {"flawed": st["flawed"]},
             "cost": {"steps": st["steps"]}}
        if seed in seeds("QUIRK_MISSING"):
            del f["features"]["heads"]
        if seed in seeds("QUIRK_EXTRA"):
            f["feautres"] = {}
        if seed in seeds("QUIRK_NAN"):
            f["features"]["heads"] = float("nan")
        forks.append(f)
    return {"task": {}, "forks": forks}


def branch(p):
    ck, out = p["checkpoint"], []
    for b in p["branches"]:
        st = dict(ck)
        rng = random.Random() if os.environ.get("QUIRK_NONDET") else random.Random(int(b["noise_key"], 16))
        if b["intervention"]:
            st["flawed"], st["steps"] = False, st["steps"] + 1
        while st["steps"] < 4:
            flip(st, rng)
        ok = st["heads"] >= 2
        if ck["steps"] >= 4 and os.environ.get("QUIRK_OVERFLIP") and b["arm"] == "on":
            ok = not ok
        out.append({"success": ok, "cost": {"steps": st["steps"] - ck["steps"]}})
    return {"branches": out}


def answer(msg):
    m, p = msg.get("method"), msg.get("params") or {}
    if m == "initialize":
        if os.environ.get("QUIRK_INIT_STDERR"):
            for i in range(int(os.environ.get("QUIRK_INIT_STDERR_LINES", "100"))):
                print(os.environ["QUIRK_INIT_STDERR"], i, file=sys.stderr, flush=True)
        if os.environ.get("QUIRK_INIT_SLEEP"):
            time.sleep(float(os.environ["QUIRK_INIT_SLEEP"]))
        return {"result": {"protocol_version": "forklab-agent/1", "world": WORLD, "capabilities": CAPS}}
    if m == "start":
        if os.environ.get("QUIRK_STDERR_MB"):
            line = ("spew %s " % p.get("seed")).encode()
            line += b"x" * (1023 - len(line)) + b"\n"
            for i in range(int(os.environ["QUIRK_STDERR_MB"]) * 1024):
                os.write(2, line)
        return {"result": start(p)}
    if m == "branch":
        return {"result": branch(p)}
    if m == "shutdown":
        return {"result": {}}
    return {"error": {"code": -32601, "message": "no method %s" % m}}


def reply(msg):
    r = dict(jsonrpc="2.0", id=msg.get("id"), **answer(msg))
    if msg.get("method") == "start" and msg["params"]["seed"] in seeds("QUIRK_NOJSONRPC"):
        del r["jsonrpc"]
    return r


print("quirky: pid %d" % os.getpid(), file=sys.stderr, flush=True)
for line in sys.stdin:
    if os.environ.get("QUIRK_RECORD"):
        with open(os.environ["QUIRK_RECORD"], "a", encoding="utf-8") as f:
            f.write(line)
    msg = json.loads(line)
    if isinstance(msg, list):
        if os.environ.get("QUIRK_BATCH_NULL"):
            out = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "cannot read batches"}}
        else:
            out = [reply(m) for m in msg]
            if os.environ.get("QUIRK_BATCH_DROP"):
                out.pop()
    else:
        if msg.get("method") == "start" and msg["params"]["seed"] in seeds("QUIRK_GARBAGE"):
            print("quirky: about to write garbage", file=sys.stderr, flush=True)
            print("loading model... done", flush=True)
            continue
        if msg.get("method") == "start" and msg["params"]["seed"] in seeds("QUIRK_MISSING") | seeds("QUIRK_EXTRA"):
            print("quirky: writing a malformed start reply", file=sys.stderr, flush=True)
        out = reply(msg)
    sys.stdout.write(json.dumps(out, separators=(",", ":"), ensure_ascii=False) + "\n")
    sys.stdout.flush()
    if not isinstance(msg, list) and msg.get("method") == "shutdown":
        break
