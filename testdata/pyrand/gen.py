#!/usr/bin/env python3
"""Writes golden.json: outputs of CPython's random.Random(seed) that
pipeline/pyrand must reproduce. Run: python3 testdata/pyrand/gen.py"""
import json, random, os

out = {"first8": {}, "long": {}, "choice4": {}}
seeds = list(range(0, 64)) + [1000, 65535, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**32 + 1,
                              12345678901234, 2**63 - 1]
for s in seeds:
    r = random.Random(s)
    out["first8"][str(s)] = [r.getrandbits(32) for _ in range(8)]
    r = random.Random(s)
    out["choice4"][str(s)] = [r.choice([0, 1, 2, 3]) for _ in range(20)]
for s in [0, 7, 2**32 + 5]:
    r = random.Random(s)
    out["long"][str(s)] = [r.getrandbits(32) for _ in range(1500)]
r = random.Random(42)
out["below"] = {str(m): [r.randrange(m) for _ in range(10)] for m in [1, 2, 3, 5, 7, 100, 1000003]}
with open(os.path.join(os.path.dirname(__file__), "golden.json"), "w") as f:
    json.dump(out, f, sort_keys=True)
    f.write("\n")
