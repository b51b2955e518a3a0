#!/usr/bin/env python3
"""A forklab-agent/1 agent with a recorded store, for forklab's tests of
recorded runs (forklab sweep --runs agent:, --runs FILE with inspect).

    recorded_agent.py [--store FILE] [--no-inspect] [--no-runs]

Standard library only. Its world, "cache_loop": an agent calls a search
tool until it has 3 fresh results, within a budget of steps. From the step
poisoned_at on (0: never) the tool's cache is poisoned and every result is
stale. The recovery, refresh, clears the cache for good and costs a step.
The run's state after each step is what a checkpointer keeps for a thread:
the store (recorded_store.json beside this file, or --store FILE) holds a
few threads, each with its metadata and its checkpoint history, and the
agent answers:

- runs: the store's threads, two per page whatever the limit asked (so
  forklab pages), in store order, with their metadata;
- load: a thread's task and its checkpoint at each fork step asked (the
  thread's state after that many steps; its last one, over, if it ended
  first); a thread whose history stops short of a step while its run is
  not over is refused (-32602);
- inspect: over, features, hidden truth and cost of any state;
- branch: the run from a state, with the intervention first, to its end
  (its branch_id, when sent, in its details).

Everything is deterministic: a branch's outcome depends on the state and
the intervention only. --no-inspect and --no-runs leave those capabilities
out of the declaration.
"""
import argparse, json, os, sys

ap = argparse.ArgumentParser()
ap.add_argument("--store", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "recorded_store.json"))
ap.add_argument("--no-inspect", action="store_true")
ap.add_argument("--no-runs", action="store_true")
a = ap.parse_args()

with open(a.store) as f:
    STORE = json.load(f)["threads"]

NEED = 3  # fresh results to succeed

WORLD = {
    "name": "cache_loop", "version": "1",
    "description": "call a search tool until 3 fresh results, within a budget; from poisoned_at on its cache serves stale results",
    "task": [{"name": "budget", "type": "int", "unit": "steps", "description": "the step budget"}],
    "features": [{"name": "last_stale", "type": "bool", "description": "the last result was stale"},
                 {"name": "fresh", "type": "int", "description": "fresh results so far"}],
    "hidden": [{"name": "poisoned", "type": "bool", "description": "the cache serves stale results now"}],
    "fault_flag": "poisoned",
    "actions": ["no_tool", "search", "refresh"],
    "interventions": [{"arm": "on", "action": "refresh", "description": "clear the cache; costs a step"}],
    "cost": {"fields": ["steps"]},
}


class Refused(Exception):
    pass


def poisoned(s):
    return s["poisoned_at"] > 0 and s["steps"] + 1 >= s["poisoned_at"] and not s["refreshed"]


def step(s):
    stale = poisoned(s)
    s["steps"] += 1
    s["fresh"] += 0 if stale else 1
    s["last"] = "stale" if stale else "fresh"


def over(s):
    return s["fresh"] >= NEED or s["steps"] >= s["budget"]


def check_state(s):
    keys = {"thread", "budget", "poisoned_at", "refreshed", "steps", "fresh", "last"}
    if not isinstance(s, dict) or set(s) != keys:
        raise Refused("not a cache_loop checkpoint")


def describe(s):
    return {"over": over(s),
            "features": {"last_stale": s["last"] == "stale", "fresh": s["fresh"]},
            "hidden": {"poisoned": s["poisoned_at"] > 0 and s["steps"] >= s["poisoned_at"] and not s["refreshed"]},
            "cost": {"steps": s["steps"]}}


def thread(run_id):
    for t in STORE:
        if t["run_id"] == run_id:
            return t
    raise Refused("no thread %r in the store" % run_id)


def m_runs(p):
    cursor, limit = p["cursor"], p["limit"]
    if not isinstance(limit, int) or limit < 1:
        raise TypeError("limit must be a positive integer")
    i = int(cursor) if cursor is not None else 0
    page = STORE[i:i + min(2, limit)]
    nxt = str(i + len(page)) if i + len(page) < len(STORE) else None
    return {"runs": [{"run_id": t["run_id"], "metadata": t["metadata"]} for t in page], "next_cursor": nxt}


def m_load(p):
    t = thread(p["run_id"])
    history = t["checkpoints"]
    forks = []
    for k in p["fork_steps"]:
        if k <= len(history):
            s = history[k - 1]
        elif over(history[-1]):
            s = history[-1]
        else:
            raise Refused("thread %s has %d steps and is not over: no checkpoint at step %d" % (t["run_id"], len(history), k))
        forks.append(dict(describe(s), fork_step=k, checkpoint=s))
    return {"task": {"budget": history[0]["budget"]}, "forks": forks}


def m_inspect(p):
    s = p["checkpoint"]
    check_state(s)
    return describe(s)


def m_branch(p):
    base = p["checkpoint"]
    check_state(base)
    out = []
    for b in p["branches"]:
        if b["intervention"] not in (None, "refresh"):
            raise TypeError("unknown intervention %r" % b["intervention"])
        s = dict(base)
        if b["intervention"] == "refresh":
            s["steps"] += 1
            s["refreshed"] = True
        while not over(s):
            step(s)
        r = {"success": s["fresh"] >= NEED, "cost": {"steps": s["steps"] - base["steps"]}}
        if b.get("branch_id"):
            r["details"] = {"branch_id": b["branch_id"]}  # as a framework's thread would be named
        out.append(r)
    return {"branches": out}


def m_initialize(p):
    caps = {"batch": 8}
    if not a.no_runs:
        caps["runs"] = True
    if not a.no_inspect:
        caps["inspect"] = True
    return {"protocol_version": "forklab-agent/1", "agent": {"name": "recorded_agent.py", "version": "1"},
            "world": WORLD, "capabilities": caps}


METHODS = {"initialize": m_initialize, "runs": m_runs, "load": m_load, "inspect": m_inspect, "branch": m_branch}


def handle(msg):
    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0" or "method" not in msg:
        return {"jsonrpc": "2.0", "id": msg.get("id") if isinstance(msg, dict) else None,
                "error": {"code": -32600, "message": "not a JSON-RPC 2.0 request"}}
    reply = {"jsonrpc": "2.0", "id": msg.get("id")}
    m = msg["method"]
    if m == "shutdown":
        reply["result"] = {}
        return reply
    if m == "runs" and a.no_runs or m == "inspect" and a.no_inspect or m not in METHODS:
        reply["error"] = {"code": -32601, "message": "no method %s" % m}
        return reply
    try:
        reply["result"] = METHODS[m](msg.get("params") or {})
    except Refused as e:
        reply["error"] = {"code": -32602, "message": str(e)}
    except (KeyError, TypeError, ValueError) as e:
        reply["error"] = {"code": -32602, "message": "bad params: %r" % (e,)}
    return reply


for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        print(json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "not JSON"}}), flush=True)
        continue
    if isinstance(msg, list):
        print(json.dumps([handle(x) for x in msg]), flush=True)
        continue
    print(json.dumps(handle(msg)), flush=True)
    if msg.get("method") == "shutdown":
        break
