#!/usr/bin/env python3
"""An independent reference for the counter world's imperfect and noisy
configurations: the seed's reference core (seed_reference.py) extended with
the imperfect-world parameters, the noisy fake model, every arm and
replicas voted by majority. Python standard library only.

It is written from the rules as the project documents them (docs/worlds.md's
counter section, the package docs of pipeline/worlds/counter, pipeline/world
and pipeline/lab/fork, README "Experiments", schemas/README.md), in the
seed's style: a run is a plain dict, a fork is copy.deepcopy. It is not a
translation of the Go code; where the documents leave a rule open, the Go
code was read only to settle it, and the settlement is listed below (S1...).

Usage:
  imperfect_reference.py --config JSON [--start S] [--seeds N] [--per-seed M]
  imperfect_reference.py --jobs < JOBS

The first prints one JSON object: the tables over seeds S..S+N-1 and the
per-seed rows of the first M of them (see run() and row()). The second reads
a JSON list of jobs {"config", "start", "seeds", "per_seed"} and prints the
list of their results, in one process (the Go tests use it). A config is a
JSON object with the keys "params" (the world's parameters; missing ones
take the seed's defaults), "model" ({"temperature", "no_tool"}), "arms" (off
first), "replicas", "fork_at" (a list of fork steps) and "policy" (null, or
a list of [feature, op, value] conditions, all of which must hold).

The world (docs/worlds.md, package counter):
  task      budget = base_budget + random.choice(slack), then
            freeze_at = random.choice(freeze_at), both drawn by
            random.Random(seed) exactly as the seed's new_run (0 or None in
            the freeze_at list: the sensor never sticks)
  over      declared, or the budget spent
  script    declare once the observation has reached the target, increment
            otherwise (the seed's step)
  actions   every action costs one step: no_tool (a turn without a tool
            call), increment, declare, refresh, nop
  increment stalls with probability p_stall (the true value stays put);
            otherwise the true value moves up one and the sensor sticks when
            it reaches freeze_at; a sensor that is not stuck is then read
  read      the true value, or with probability p_obs_noise off by one, up
            or down with equal probability, never below 0
  refresh   fails with probability p_refresh_fail (burns its step, nothing
            else); otherwise un-sticks the sensor and reads it
  nop       the placebo: burns its step, nothing else
  success   declared with the true value at the target
Every random event of the world is draw(seed, purpose, index) with index a
counter kept in the run (increments attempted, sensor reads, refreshes
applied), so a copied run meets the same dice.

The model (fork.Model): at temperature 0 the script. Above 0, a turn departs
from the script with probability temperature; a departing turn calls no
tool with probability no_tool, and otherwise another of the model's tools
(increment, declare) chosen uniformly. Its noise is drawn from the stream
key(seed, 0) before the fork and key(seed, fork step, arm code, replica) in
a branch (arm codes off 1, on 2, placebo 3, aa 4, policy 5).

The lab (fork.Lab, README "Experiments"): run the seed to the fork step
("while steps < fork_at and not over", the seed's loop); fork the run into
each arm, `replicas` times; apply the arm's intervention at the fork
unconditionally, even to a run already over, as the seed applies refresh
(on: refresh; placebo: nop; policy: refresh where its rule fires on the
checkpoint's features; off and aa: none; aa is off with its own noise);
finish each branch. Each side of a pair (off, and a treatment arm)
succeeds when a strict majority of its replicas succeed (a tie fails); the
pair is rescued (persuadable), harmed (sleeping dog), or unchanged: a sure
thing (both succeed) or a lost cause (both fail).

Settled from the Go code where the documents are silent or loose:
  S1 draw(key, purpose, index) = top 53 bits of
     fmix(key ^ fmix(purpose * 0x9e3779b97f4a7c15 ^ index)) / 2^53, and
     key(seed, p1, p2, ...) = fmix(... fmix(fmix(seed + G) ^ (p1 + G)) ^
     (p2 + G) ...), with G = 0x9e3779b97f4a7c15 and fmix SplitMix64's
     finaliser (Steele, Lea and Flood, OOPSLA 2014), all modulo 2^64. The
     documents name the finaliser and the inputs, not how they combine.
     Purposes: stall 1, obs noise 2, obs noise sign 3, refresh fail 4,
     model 5, model no-tool 6 (world.Purpose*). The prefix stream is
     key(seed, 0), and the arm codes inside branch keys (fork's unexported
     Arm.code) are off 1, on 2, placebo 3, aa 4, policy 5.
  S2 The world's counters are incremented before their draw, so the first
     increment, read and refresh draw index 1. The model's draws are
     indexed by the turn: the steps taken before it (0 for the first turn;
     an intervention's step counts, so after a refresh at step 3 the
     branch's first model turn is turn 4).
  S3 A stalled increment still reads the sensor when it is not stuck (so
     sensor noise can move the observation of a stall); a stuck sensor is
     not read at all (no read index is spent); the sensor sticks only when
     an increment moves the true value onto freeze_at.
  S4 The noise sign draw (its own purpose, the read's index) below 0.5
     reads one low, otherwise one high.
  S5 A failed refresh spends a refresh index but no read index; a refresh
     that succeeds reads through the sensor noise like an increment.
  S6 same_obs and repeat_run change only on an increment (as the seed's
     same_obs changes only in step): declare, refresh, nop and no_tool
     turns leave both as they were. (The declaration describes them as
     "the last action", which a refresh or a no-tool turn is not here.)
  S7 A departing turn draws once more (the no-tool purpose, same turn index)
     and picks among the other tools by rescaling that same draw:
     (u - no_tool) / (1 - no_tool) times their number. For the counter,
     whose model has two tools, that is always the other one.
  S8 The policy arm's branches use the policy arm's own noise stream
     (code 5) whether or not its rule fires, so with temperature > 0 a
     policy pair whose rule did not fire can still flip. (schemas/README.md
     called such pairs "unchanged by construction", which holds only for a
     greedy model; it now says so.)
"""
import argparse, copy, json, random, sys
from collections import Counter

M64 = (1 << 64) - 1
G = 0x9E3779B97F4A7C15  # the golden-ratio increment of SplitMix64

STALL, OBS_NOISE, OBS_NOISE_SIGN, REFRESH_FAIL, MODEL, MODEL_NO_TOOL = 1, 2, 3, 4, 5, 6
ARM_CODE = {"off": 1, "on": 2, "placebo": 3, "aa": 4, "policy": 5}
TOOLS = ["increment", "declare"]  # what the model may call
INTERVENTION = {"on": "refresh", "placebo": "nop"}
QUADRANTS = ["persuadable", "sleeping_dog", "sure_thing", "lost_cause"]

DEFAULTS = {"target": 6, "base_budget": 7, "slack": [0, 0, 1, 2], "freeze_at": [None, None, 1, 2],
            "p_stall": 0.0, "p_obs_noise": 0.0, "p_refresh_fail": 0.0}


def fmix(z):
    """SplitMix64's finaliser (Stafford's Mix13 variant), on 64 bits."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def draw(key, purpose, index):
    h = fmix(key ^ fmix(((purpose * G) & M64) ^ index))
    return (h >> 11) / float(1 << 53)


def key(seed, *parts):
    k = fmix((seed + G) & M64)
    for p in parts:
        k = fmix(k ^ ((p + G) & M64))
    return k


# --- the world -------------------------------------------------------------

def new_run(seed, P):
    r = random.Random(seed)
    slack = r.choice(P["slack"])
    freeze = r.choice(P["freeze_at"]) or None   # 0 written for None
    return {"seed": seed, "v": 0, "obs": 0, "steps": 0, "declared": False,
            "frozen": False, "same_obs": False, "repeat_run": 0,
            "budget": P["base_budget"] + slack, "slack": slack, "freeze_at": freeze,
            "attempts": 0, "reads": 0, "refreshes": 0}


def over(s):
    return s["declared"] or s["steps"] >= s["budget"]


def script(s, P):
    return "declare" if s["obs"] >= P["target"] else "increment"


def chance(s, purpose, index, p):
    return draw(s["seed"], purpose, index) < p


def read(s, P):
    s["reads"] += 1
    if chance(s, OBS_NOISE, s["reads"], P["p_obs_noise"]):
        if draw(s["seed"], OBS_NOISE_SIGN, s["reads"]) < 0.5:
            return max(0, s["v"] - 1)
        return s["v"] + 1
    return s["v"]


def act(s, a, P):
    s["steps"] += 1                       # every action burns a step
    if a == "declare":
        s["declared"] = True
    elif a == "increment":
        s["attempts"] += 1
        if not chance(s, STALL, s["attempts"], P["p_stall"]):
            s["v"] += 1
            if s["freeze_at"] == s["v"]: s["frozen"] = True
        prev = s["obs"]
        if not s["frozen"]: s["obs"] = read(s, P)
        s["same_obs"] = s["obs"] == prev
        s["repeat_run"] = s["repeat_run"] + 1 if s["same_obs"] else 0
    elif a == "refresh":
        s["refreshes"] += 1
        if not chance(s, REFRESH_FAIL, s["refreshes"], P["p_refresh_fail"]):
            s["frozen"] = False
            s["obs"] = read(s, P)
    # nop and no_tool: nothing but the step


def features(s):
    return {"same_obs": s["same_obs"], "repeat_run": s["repeat_run"], "obs_value": s["obs"],
            "steps_used": s["steps"], "budget_left": max(0, s["budget"] - s["steps"])}


# --- the model and the lab -------------------------------------------------

def choose(s, P, model, k):
    greedy = script(s, P)
    t = model["temperature"]
    if t == 0 or draw(k, MODEL, s["steps"]) >= t:
        return greedy
    u = draw(k, MODEL_NO_TOOL, s["steps"])
    if u < model["no_tool"]:
        return "no_tool"
    others = [a for a in TOOLS if a != greedy]
    i = int((u - model["no_tool"]) / (1 - model["no_tool"]) * len(others))
    return others[min(i, len(others) - 1)]


def play(s, P, model, k, until=None):
    while not over(s) and (until is None or s["steps"] < until):
        act(s, choose(s, P, model, k), P)


def success(s, P):
    return s["declared"] and s["v"] == P["target"]


OPS = {"=": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
       "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


def fires(rule, feats):
    return all(OPS[op](feats[f], v) for f, op, v in rule)


def fork(seed, fork_at, cfg):
    """One checkpoint of seed and all its branches: the task, the
    checkpoint's features, whether the policy rule fires, and the winning
    replicas of every arm."""
    P, model = cfg["P"], cfg["model"]
    s = new_run(seed, P)
    play(s, P, model, key(seed, 0), until=fork_at)
    feats = features(s)
    fire = cfg["policy"] is not None and fires(cfg["policy"], feats)
    wins = {}
    for arm in cfg["arms"]:
        wins[arm] = 0
        for rep in range(cfg["replicas"]):
            b = copy.deepcopy(s)                                   # the fork
            a = INTERVENTION.get(arm, "refresh" if arm == "policy" and fire else None)
            if a: act(b, a, P)                                     # unconditionally
            play(b, P, model, key(seed, fork_at, ARM_CODE[arm], rep))
            wins[arm] += success(b, P)
    return s, feats, fire, wins


def majority(wins, k):
    return 2 * wins > k


def quadrant(control, treatment):
    if treatment and not control: return "persuadable"
    if control and not treatment: return "sleeping_dog"
    return "sure_thing" if control else "lost_cause"


def row(seed, fork_at, s, feats, fire, wins, cfg):
    """A per-seed row: 'SEED fF task=BUDGET/FREEZE same_obs=B repeat=N
    [fires=B] wins=ARM:W,... quadrants=ARM:Q,...'."""
    k = cfg["replicas"]
    treat = [a for a in cfg["arms"] if a != "off"]
    out = "%d f%d task=%d/%s same_obs=%s repeat=%d" % (
        seed, fork_at, s["budget"], s["freeze_at"] or "-", str(feats["same_obs"]).lower(), feats["repeat_run"])
    if cfg["policy"] is not None:
        out += " fires=%s" % str(fire).lower()
    out += " wins=" + ",".join("%s:%d" % (a, wins[a]) for a in cfg["arms"])
    out += " quadrants=" + ",".join(
        "%s:%s" % (a, quadrant(majority(wins["off"], k), majority(wins[a], k))) for a in treat)
    return out


def run(cfg, start, n, per_seed):
    """The tables over seeds start..start+n-1 and the rows of the first
    per_seed seeds. tables[fork][arm] counts the pair quadrants, overall
    ("all"), by same_obs ("same_obs=true"/"false") and for the policy arm by
    whether its rule fired ("fires=true"/"false")."""
    k = cfg["replicas"]
    tables = {str(f): {a: {} for a in cfg["arms"] if a != "off"} for f in cfg["fork_at"]}
    rows = []
    for seed in range(start, start + n):
        for f in cfg["fork_at"]:
            s, feats, fire, wins = fork(seed, f, cfg)
            if seed < start + per_seed:
                rows.append(row(seed, f, s, feats, fire, wins, cfg))
            control = majority(wins["off"], k)
            for arm, t in tables[str(f)].items():
                q = quadrant(control, majority(wins[arm], k))
                slices = ["all", "same_obs=" + str(feats["same_obs"]).lower()]
                if arm == "policy":
                    slices.append("fires=" + str(fire).lower())
                for sl in slices:
                    t.setdefault(sl, Counter())[q] += 1
    for f in tables.values():
        for arm, t in f.items():
            for sl in t:
                t[sl] = [t[sl][q] for q in QUADRANTS]
    return {"tables": tables, "per_seed": rows}


def resolve(cfg):
    """The config with every parameter filled in (cfg["P"])."""
    P = dict(DEFAULTS)
    P.update(cfg.get("params") or {})
    P["freeze_at"] = [x or None for x in P["freeze_at"]]
    model = {"temperature": 0.0, "no_tool": 0.5}
    model.update(cfg.get("model") or {})
    out = dict(cfg, P=P, model=model)
    out.setdefault("policy", None)
    if cfg["arms"][0] != "off":
        sys.exit("arms must list off first")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", help="the configuration, as JSON")
    ap.add_argument("--jobs", action="store_true", help="read a JSON list of jobs from stdin")
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--seeds", type=int, default=300)
    ap.add_argument("--per-seed", type=int, default=0, help="rows for the first N seeds")
    a = ap.parse_args()
    if a.jobs:
        out = [run(resolve(j["config"]), j["start"], j["seeds"], j["per_seed"]) for j in json.load(sys.stdin)]
    elif a.config:
        out = run(resolve(json.loads(a.config)), a.start, a.seeds, a.per_seed)
    else:
        ap.error("give --config or --jobs")
    json.dump(out, sys.stdout, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
