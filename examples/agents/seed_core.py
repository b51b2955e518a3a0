#!/usr/bin/env python3
"""The seed's reference core as a forklab agent, on Python's standard library only.

The world logic below -- new_run, step, refresh, finish -- is the seed's
reference core, unchanged (testdata/seed/seed_reference.py). Around it, this
file declares the world and answers start, branch and fold; the Python SDK
(sdk/python: forklab_agent) speaks forklab-agent/1 for it
(docs/agent-protocol.md): JSON-RPC 2.0, one JSON object per line on stdin and
stdout, log lines on stderr.

    forklab sweep --agent 'python3 examples/agents/seed_core.py' --seeds 0:300 --fork-at 3 --out x
    forklab agent check 'python3 examples/agents/seed_core.py'

It can also play one run as a session on forklab's session log, with plain
HTTP and the idempotent-producer headers, and resume a killed run from the
log (docs/agent-protocol.md, "Sessions on the log"):

    python3 examples/agents/seed_core.py run --log http://127.0.0.1:4437 --session demo --seed 5 --delay 0.3
    forklab fork --stream demo --offset OFFSET --arm on --agent 'python3 examples/agents/seed_core.py'
"""
import argparse, copy, json, os, random, sys, time, urllib.error, urllib.parse, urllib.request

# The SDK of this repository (sdk/python), by path; pip install ./sdk/python
# makes it importable from anywhere.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk", "python"))
from forklab_agent import Agent, BadCheckpoint, InvalidParams

# ---------------------------------------------------------------------------
# The seed's reference core, unchanged.

TARGET = 6

def new_run(seed):
    r = random.Random(seed)
    return {"v": 0, "obs": 0, "steps": 0, "done": False, "declared": False,
            "frozen": False, "same_obs": False,
            "budget": 7 + r.choice([0, 0, 1, 2]),       # some runs have slack
            "freeze_at": r.choice([None, None, 1, 2])}  # sensor sticks here

def step(s):
    if s["done"] or s["steps"] >= s["budget"]: s["done"] = True; return
    s["steps"] += 1
    if s["obs"] >= TARGET: s["done"] = s["declared"] = True; return
    s["v"] += 1
    if s["freeze_at"] == s["v"]: s["frozen"] = True
    prev = s["obs"]
    if not s["frozen"]: s["obs"] = s["v"]
    s["same_obs"] = s["obs"] == prev

def refresh(s):
    s["steps"] += 1            # recovery burns an action
    s["frozen"] = False
    s["obs"] = s["v"]

def finish(s):
    while not s["done"]: step(s)
    return s["declared"] and s["v"] == TARGET

# ---------------------------------------------------------------------------
# What forklab sees: the declaration, and the run around the core's state.

BASE_BUDGET = 7

DECLARATION = {
    "name": "seed_core",
    "version": "1",
    "description": "The seed's reference core (a counter read through a sensor that may stick), its world logic unchanged, played by the seed's greedy agent.",
    "params": [],
    "task": [
        {"name": "budget", "type": "int", "unit": "steps", "description": "the step budget: 7 plus the slack"},
        {"name": "slack", "type": "int", "unit": "steps", "description": "the slack the task drew from [0, 0, 1, 2]"},
        {"name": "freeze_at", "type": "int", "nullable": True, "description": "the value at which the sensor sticks; null when it never does"},
    ],
    "features": [
        {"name": "same_obs", "type": "bool", "description": "the last increment left the observation unchanged (the seed's feature)"},
        {"name": "repeat_run", "type": "int", "unit": "actions", "description": "consecutive increments, ending with the last, that left the observation unchanged"},
        {"name": "obs_value", "type": "int", "description": "the current observation"},
        {"name": "steps_used", "type": "int", "unit": "steps", "description": "steps taken so far"},
        {"name": "budget_left", "type": "int", "unit": "steps", "description": "budget minus steps used, never below 0"},
    ],
    "hidden": [
        {"name": "stuck", "type": "bool", "description": "the sensor is stuck at the checkpoint"},
        {"name": "fault", "type": "bool", "description": "the task has a sensor fault at all, stuck yet or not"},
        {"name": "value", "type": "int", "description": "the true value behind the observation"},
    ],
    "fault_flag": "fault",
    "actions": ["no_tool", "increment", "declare", "refresh"],
    "interventions": [
        {"arm": "on", "action": "refresh", "description": "refresh: costs one step, un-sticks the sensor and re-reads the true value"},
    ],
    "cost": {"fields": ["steps"], "description": "every action, the refresh included, costs one step of the budget"},
}


class Run:
    """One run: the core's state, plus what forklab's features need that the
    core does not keep (the length of the current run of repeated
    observations)."""

    def __init__(self, seed, state=None, repeat_run=0):
        self.seed = seed
        self.s = new_run(seed) if state is None else state
        self.repeat_run = repeat_run

    def over(self):
        return self.s["declared"] or self.s["steps"] >= self.s["budget"]

    def act(self):
        """One turn of the greedy agent: the core's step. Returns the action
        taken, or None when the run was already over."""
        s = self.s
        steps, declared = s["steps"], s["declared"]
        step(s)
        if s["steps"] == steps:
            return None
        if s["declared"] and not declared:
            return "declare"
        self.repeat_run = self.repeat_run + 1 if s["same_obs"] else 0
        return "increment"

    def advance(self, fork_step):
        """The core's "while steps < fork_at and not done: step"."""
        while self.s["steps"] < fork_step and not self.s["done"]:
            self.act()

    def checkpoint(self, fork_step):
        return {"seed": self.seed, "fork_step": fork_step, "state": dict(self.s), "repeat_run": self.repeat_run}

    def fork(self, fork_step):
        s = self.s
        return {
            "fork_step": fork_step,
            "over": self.over(),
            "checkpoint": self.checkpoint(fork_step),
            "features": {"same_obs": s["same_obs"], "repeat_run": self.repeat_run, "obs_value": s["obs"],
                         "steps_used": s["steps"], "budget_left": max(0, s["budget"] - s["steps"])},
            "hidden": {"stuck": s["frozen"], "fault": s["freeze_at"] is not None, "value": s["v"]},
            "cost": {"steps": s["steps"]},
        }

# ---------------------------------------------------------------------------
# forklab-agent/1, through the Python SDK (sdk/python, docs/sdk-python.md):
# it speaks the protocol, checks params against the schemas (a seed, fork
# steps, declared arms and interventions) and every reply against the
# schemas and the declaration. What is left here is the agent.


def start(p):
    if p["model"]["temperature"] != 0:
        raise InvalidParams("params.model.temperature: seed_core plays the seed's greedy agent only (temperature 0)")
    run = Run(p["seed"])
    s = run.s
    task = {"budget": s["budget"], "slack": s["budget"] - BASE_BUDGET, "freeze_at": s["freeze_at"]}
    forks = []
    for f in p["fork_steps"]:
        run.advance(f)
        forks.append(run.fork(f))
    return {"task": task, "forks": forks}


def read_checkpoint(cp):
    """The run a checkpoint holds, or BadCheckpoint: a branch may come to a
    process that never saw the start, so the checkpoint is all it has."""
    try:
        s = cp["state"]
        if (type(cp["seed"]) is int and type(cp["repeat_run"]) is int and type(s["v"]) is int
                and type(s["obs"]) is int and type(s["steps"]) is int and type(s["budget"]) is int
                and type(s["done"]) is bool and type(s["declared"]) is bool and type(s["frozen"]) is bool
                and type(s["same_obs"]) is bool and s["freeze_at"] in (None, 1, 2)):
            return Run(cp["seed"], s, cp["repeat_run"])
    except (KeyError, TypeError):
        pass
    raise BadCheckpoint("params.checkpoint is not a seed_core checkpoint (want seed, fork_step, state, repeat_run)")


def branch(p):
    base = read_checkpoint(p["checkpoint"])
    out = []
    for b in p["branches"]:
        s = dict(base.s)                     # the fork (the state holds scalars only)
        if b["intervention"] == "refresh":
            refresh(s)
        success = finish(s)
        out.append({"success": success, "cost": {"steps": s["steps"] - base.s["steps"]}})
    return {"branches": out}


def fork_at_events(p):
    """fold: the run a session's events describe, as a checkpoint at its step."""
    run, _ = fold(p["events"])
    if run is None:
        raise InvalidParams("params.events hold no start event before the offset: nothing to fork")
    f = run.fork(run.s["steps"])
    f["seed"] = run.seed
    return f


agent = Agent(DECLARATION, start=start, branch=branch, fold=fork_at_events, batch=256, name="seed_core.py", version="1")

# ---------------------------------------------------------------------------
# Sessions on the log: every action is an event on a Durable Streams stream,
# appended with the idempotent-producer headers; the run is the fold of its
# events, so a killed run resumes exactly where the log says it stopped.


class FoldError(Exception):
    pass


def fold(events):
    """Replays a session's events through the core. Returns (run or None,
    finished). Refuses events the replay disagrees with."""
    run, finished = None, False
    for i, e in enumerate(events):
        t = e.get("type") if isinstance(e, dict) else None
        if t == "incarnation":
            continue
        if finished:
            raise InvalidParams("params.events[%d]: an event after the outcome" % i)
        if t == "start":
            if run is not None or e.get("agent") != "seed_core" or type(e.get("seed")) is not int:
                raise InvalidParams("params.events[%d]: a second start, or a start of another agent" % i)
            run = Run(e["seed"])
        elif t == "action":
            if run is None:
                raise InvalidParams("params.events[%d]: an action before the start" % i)
            a = run.act()
            if (a, run.s["steps"], run.s["obs"]) != (e.get("action"), e.get("step"), e.get("obs")):
                raise InvalidParams("params.events[%d]: the replay took %s to step %d (obs %d), the event says %s to %s (obs %s)"
                               % (i, a, run.s["steps"], run.s["obs"], e.get("action"), e.get("step"), e.get("obs")))
        elif t == "outcome":
            finished = True
        else:
            raise InvalidParams("params.events[%d]: unknown event type %r" % (i, t))
    return run, finished


class Log:
    """The session's stream on forklab's session log, as plain HTTP."""

    def __init__(self, base, stream, token=None):
        self.url = base.rstrip("/") + "/v1/stream/" + urllib.parse.quote(stream, safe="/")
        self.producer = stream
        self.token = token

    def request(self, method, url, body=None, headers=None, retry_for=120):
        """Sends one request, retrying while the log is unreachable (the
        same producer seq makes a retried append harmless)."""
        h = dict(headers or {})
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        delay, deadline = 0.1, time.time() + retry_for
        while True:
            try:
                with urllib.request.urlopen(urllib.request.Request(url, data=body, headers=h, method=method), timeout=30) as r:
                    return r.status, r.headers, r.read()
            except urllib.error.HTTPError as e:
                if e.code != 503 or time.time() > deadline:
                    return e.code, e.headers, e.read()
            except (urllib.error.URLError, OSError) as e:
                if time.time() > deadline:
                    raise SystemExit("seed_core: the session log at %s stayed unreachable: %s" % (self.url, e))
            time.sleep(delay)
            delay = min(delay * 2, 3)

    def read(self, offset="-1"):
        """Every event from offset; returns (events, next offset)."""
        events = []
        while True:
            status, h, body = self.request("GET", self.url + "?offset=" + urllib.parse.quote(offset))
            if status == 404:
                return None, offset
            if status != 200:
                raise SystemExit("seed_core: read %s: HTTP %d %s" % (self.url, status, body[:200]))
            events += json.loads(body or b"[]")
            offset = h.get("Stream-Next-Offset", offset)
            if h.get("Stream-Up-To-Date") == "true" or h.get("Stream-Closed") == "true" or not body or body == b"[]":
                return events, offset

    def create(self):
        status, _, body = self.request("PUT", self.url, headers={"Content-Type": "application/json"})
        if status not in (200, 201, 204):
            raise SystemExit("seed_core: create %s: HTTP %d %s" % (self.url, status, body[:200]))

    def append(self, event, epoch, seq, close=False):
        h = {"Content-Type": "application/json", "Producer-Id": self.producer,
             "Producer-Epoch": str(epoch), "Producer-Seq": str(seq)}
        if close:
            h["Stream-Closed"] = "true"
        status, headers, body = self.request("POST", self.url, json.dumps(event).encode(), h)
        return status, headers


def run_session(a):
    log = Log(a.log, a.session, a.token)
    events, offset = log.read()
    if events is None:
        log.create()
        events, offset = [], "-1"
    run, finished = fold(events)
    if finished:
        print("session %s already finished" % a.session, file=sys.stderr)
        return 0
    if run is not None and run.seed != a.seed:
        raise SystemExit("seed_core: session %s holds seed %d, not %d" % (a.session, run.seed, a.seed))
    # Claim the next epoch: the first append of this incarnation fences every
    # older one (their next append gets 403). Auto-claim: on 403 the log
    # says the current epoch; take the one after it.
    epoch = 1 + max([e["epoch"] for e in events if isinstance(e, dict) and e.get("type") == "incarnation"], default=-1)
    nonce = os.urandom(8).hex()
    while True:
        status, h = log.append({"type": "incarnation", "epoch": epoch, "nonce": nonce, "pid": os.getpid()}, epoch, 0)
        if status == 403:
            epoch = int(h.get("Producer-Epoch", epoch)) + 1
            continue
        if status not in (200, 204):
            raise SystemExit("seed_core: claim epoch %d: HTTP %d" % (epoch, status))
        break
    # Fold what older incarnations appended before the claim took effect.
    more, offset = log.read(offset)
    events += more or []
    last = [e for e in events if isinstance(e, dict) and e.get("type") == "incarnation"][-1]
    if last.get("nonce") != nonce:
        raise SystemExit(3)  # another incarnation claimed the session at the same moment
    run, finished = fold(events)
    if finished:
        return 0
    seq = 1

    def append(event, close=False):
        nonlocal seq
        status, h = log.append(event, epoch, seq, close)
        if status == 403 or (status == 409 and h.get("Stream-Closed") == "true"):
            # Fenced: a newer incarnation owns the session (or finished it).
            print("seed_core: session %s: fenced by a newer incarnation; exiting without writing" % a.session, file=sys.stderr)
            raise SystemExit(3)
        if status not in (200, 204):
            raise SystemExit("seed_core: append: HTTP %d" % status)
        seq += 1

    if run is None:
        run = Run(a.seed)
        append({"type": "start", "agent": "seed_core", "version": "1", "seed": a.seed})
    while not run.over() and (a.until == 0 or run.s["steps"] < a.until):
        if a.delay:
            time.sleep(a.delay)
        act = run.act()
        append({"type": "action", "step": run.s["steps"], "action": act, "obs": run.s["obs"]})
    if run.over():
        append({"type": "outcome", "success": finish(copy.deepcopy(run.s)), "steps": run.s["steps"]}, close=True)
    print("session %s: step %d%s" % (a.session, run.s["steps"], ", finished" if run.over() else ""), file=sys.stderr)
    return 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "run":
        ap = argparse.ArgumentParser(prog="seed_core.py run")
        ap.add_argument("--log", default="http://127.0.0.1:4437", help="session log URL (forklab log serve)")
        ap.add_argument("--session", required=True, help="the session's stream name; also the producer id")
        ap.add_argument("--seed", type=int, required=True)
        ap.add_argument("--until", type=int, default=0, help="stop after this many steps (0: to the end)")
        ap.add_argument("--delay", type=float, default=0, help="seconds to pause before each action")
        ap.add_argument("--token", default=os.environ.get("FORKLAB_TOKEN"))
        return run_session(ap.parse_args(sys.argv[2:]))
    agent.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
