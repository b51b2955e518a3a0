#!/usr/bin/env python3
"""Writes golden.json from the seed's reference core (seed_reference.py, a copy
of ../shared/reference/seed_reference.py): the numbers pipeline tests pin.

  per_seed[fork_at] : for seeds 0..999, "budget,freeze_at,same_obs,label"
  tables            : the reference core's --json table for several seed
                      ranges, fork steps and the same_obs policy

Run: python3 testdata/seed/gen_golden.py"""
import copy, json, os, subprocess, sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import seed_reference as ref

per_seed = {}
for fork_at in range(1, 11):
    rows = []
    for seed in range(1000):
        s = ref.new_run(seed)
        task = (s["budget"], s["freeze_at"])
        feat, label = ref.pair(seed, fork_at)
        rows.append("%d,%s,%s,%s" % (task[0], "" if task[1] is None else task[1],
                                     "true" if feat else "false", label))
    per_seed[str(fork_at)] = rows

tables = []
for start, n, fork_at, policy in [(0, 300, 3, None), (0, 300, 3, "same_obs"), (0, 300, 1, None),
                                  (0, 300, 2, None), (0, 300, 4, None), (0, 300, 5, None),
                                  (0, 300, 7, None), (0, 300, 9, None), (300, 700, 3, None),
                                  (1000, 5000, 3, None), (1000, 5000, 2, "same_obs"),
                                  (123456, 1000, 4, None)]:
    args = [sys.executable, os.path.join(here, "seed_reference.py"), "--start", str(start),
            "--seeds", str(n), "--fork-at", str(fork_at), "--json"]
    if policy:
        args += ["--policy", policy]
    out = json.loads(subprocess.check_output(args))
    tables.append({"start": start, "seeds": n, "fork_at": fork_at, "policy": policy, "table": out})

with open(os.path.join(here, "golden.json"), "w") as f:
    json.dump({"per_seed": per_seed, "tables": tables}, f, sort_keys=True, indent=1)
    f.write("\n")
