#!/usr/bin/env python3
"""Writes imperfect_golden.json from imperfect_reference.py: noisy and
imperfect counter-world tables that the Go lab, runners and sweep are pinned
to (package pipeline/worlds/counter/countertest reads the file; the tests
are pipeline/lab/fork/imperfect_test.go, which also reruns the reference on
part of it, pipeline/worlds/counter/imperfect_test.go and
pipeline/lab/sweep/imperfect_test.go).

For each configuration below:
  seeds            [start, end): the seed range the tables count
  tables[F][ARM]   the pairs of ARM against off at fork step F, as
                   [persuadable, sleeping_dog, sure_thing, lost_cause]
                   (rescued, harmed, sure things, lost causes), overall
                   ("all"), by same_obs, and for the policy arm by whether
                   its rule fired
  per_seed         one row per (seed, fork step) for the first per_seed_seeds
                   seeds: task, features, winning replicas per arm, quadrant
                   per treatment arm (imperfect_reference.row)

Run: python3 testdata/seed/gen_imperfect_golden.py   (about half a minute)"""
import json, os, sys, time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import imperfect_reference as ref

TOP = 2**63 - 1  # the sweep's largest seed bound (END is exclusive)

CONFIGS = [
    # testdata/specs/noisy.yaml (make sweep-noisy) on fewer seeds.
    {"name": "noisy-5", "seeds": [0, 1200], "fork_at": [2, 3], "arms": ["off", "on", "placebo", "aa"],
     "replicas": 5, "params": {"p_stall": 0.15, "p_obs_noise": 0.05, "p_refresh_fail": 0.2},
     "model": {"temperature": 0.1, "no_tool": 0.5}},
    # Wider slack and fault lists (one sticks at the target), another
    # target and budget, a noisier model whose departures mostly call no
    # tool.
    {"name": "wide-3", "seeds": [5000, 6200], "fork_at": [1, 3, 5], "arms": ["off", "on", "placebo", "aa"],
     "replicas": 3, "params": {"target": 5, "base_budget": 8, "slack": [0, 1, 1, 2, 3, 4],
                               "freeze_at": [0, 0, 0, 1, 2, 3, 5], "p_stall": 0.05, "p_obs_noise": 0.05,
                               "p_refresh_fail": 0.3},
     "model": {"temperature": 0.25, "no_tool": 0.8}},
    # Even replica counts: ties are common and count as failure.
    {"name": "even-4", "seeds": [0, 1000], "fork_at": [3], "arms": ["off", "on", "aa"],
     "replicas": 4, "params": {"p_stall": 0.2, "p_refresh_fail": 0.5},
     "model": {"temperature": 0.2, "no_tool": 0.5}},
    {"name": "even-2-policy", "seeds": [TOP - 1000, TOP], "fork_at": [2, 4],
     "arms": ["off", "on", "aa", "policy"], "replicas": 2,
     "params": {"p_stall": 0.05, "p_obs_noise": 0.1, "p_refresh_fail": 0.1},
     "model": {"temperature": 0.15, "no_tool": 0.7}, "policy": [["repeat_run", ">=", 1], ["obs_value", "<", 3]]},
    # A greedy model in an imperfect world: all randomness is the task's,
    # so aa never flips; a two-condition policy rule.
    {"name": "greedy-imperfect", "seeds": [2**32 - 500, 2**32 + 1500], "fork_at": [2, 3, 4],
     "arms": ["off", "on", "placebo", "aa", "policy"], "replicas": 1,
     "params": {"p_stall": 0.2, "p_obs_noise": 0.1, "p_refresh_fail": 0.3},
     "model": {"temperature": 0, "no_tool": 0.5},
     "policy": [["repeat_run", ">=", 1], ["budget_left", ">", 3]]},
]
PER_SEED = 12


def main():
    out = []
    for c in CONFIGS:
        t0 = time.time()
        c = dict(c, policy=c.get("policy"), per_seed_seeds=PER_SEED)
        start, end = c["seeds"]
        res = ref.run(ref.resolve(c), start, end - start, PER_SEED)
        out.append(dict(c, **res))
        print("%s: %.1fs" % (c["name"], time.time() - t0), file=sys.stderr)
    with open(os.path.join(here, "imperfect_golden.json"), "w") as f:
        f.write('{\n "about": "written by gen_imperfect_golden.py from imperfect_reference.py; do not edit",\n'
                ' "configs": [\n')
        for i, c in enumerate(out):
            f.write("  {\n")
            keys = [k for k in sorted(c) if k not in ("tables", "per_seed")]
            for k in keys:
                f.write("   %s: %s,\n" % (json.dumps(k), json.dumps(c[k], sort_keys=True)))
            f.write('   "tables": {\n')
            for j, (fs, arms) in enumerate(sorted(c["tables"].items(), key=lambda x: int(x[0]))):
                f.write("    %s: {\n" % json.dumps(fs))
                for m, (arm, t) in enumerate(arms.items()):
                    f.write("     %s: %s%s\n" % (json.dumps(arm), json.dumps(t, sort_keys=True),
                                                 "," if m < len(arms) - 1 else ""))
                f.write("    }%s\n" % ("," if j < len(c["tables"]) - 1 else ""))
            f.write("   },\n")
            f.write('   "per_seed": [\n')
            f.write(",\n".join("    " + json.dumps(r) for r in c["per_seed"]))
            f.write("\n   ]\n  }%s\n" % ("," if i < len(out) - 1 else ""))
        f.write(" ]\n}\n")


if __name__ == "__main__":
    main()
