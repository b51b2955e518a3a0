#!/usr/bin/env python3
"""examples/agents/seed_core.py with faults, for forklab's tests.

    faulty_agent.py [--crash 7,8] [--hang 13] [--garbage 21] [--drop-feature NAME] [--coin] [--count FILE]

--crash, --hang and --garbage name seeds modulo 50: a start request of such a
seed makes the process exit at once, a branch request of it makes the process
hang, and a start request of it makes the process print a line that is not
JSON. --drop-feature leaves a declared feature out of every start reply;
--coin makes branch outcomes a coin flip without declaring the agent
nondeterministic. --count appends "METHOD SEED" to FILE for every start and
branch request received, so tests can count what an agent was asked.
"""
import argparse, importlib.util, json, os, random, sys, time

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("seed_core", os.path.join(here, "..", "..", "examples", "agents", "seed_core.py"))
core = importlib.util.module_from_spec(spec)
spec.loader.exec_module(core)

ap = argparse.ArgumentParser()
seeds = lambda s: {int(x) for x in s.split(",") if x}
ap.add_argument("--crash", type=seeds, default=set())
ap.add_argument("--hang", type=seeds, default=set())
ap.add_argument("--garbage", type=seeds, default=set())
ap.add_argument("--drop-feature", default="")
ap.add_argument("--coin", action="store_true")
ap.add_argument("--count", default="")
a = ap.parse_args()

plain_start, plain_branch = core.m_start, core.m_branch


def start(p):
    seed = p.get("seed", 0)
    if a.count:
        with open(a.count, "a") as f:
            f.write("start %s\n" % seed)
    if isinstance(seed, int) and seed % 50 in a.crash:
        print("faulty_agent: crashing on seed %d" % seed, file=sys.stderr, flush=True)
        os._exit(1)
    if isinstance(seed, int) and seed % 50 in a.garbage:
        print("faulty_agent: garbage on seed %d" % seed, file=sys.stderr, flush=True)
        sys.stdout.write("Traceback (most recent call last): seed %d\n" % seed)
        sys.stdout.flush()
    r = plain_start(p)
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
    if a.coin:
        for b in r["branches"]:
            b["success"] = random.random() < 0.5
    return r


core.METHODS["start"] = start
core.METHODS["branch"] = branch
core.serve()
