#!/usr/bin/env python3
"""Writes golden.json: outputs of CPython's random.Random(seed) that
pipeline/worlds/pyrand must reproduce. Run: python3 testdata/pyrand/gen.py"""
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
# Batches of 128 consecutive seeds (pyrand.Batch.SeedRange): the first 8
# outputs of every seed, and 1500 outputs for a few, which cross two
# 624-word twists. The bases reach the top of one-word keys, straddle 2^32
# (where CPython switches to a two-word key) and end at 2^64-1.
out["range8"] = {}
for base in [0, 1000000, 2**31 - 64, 2**32 - 128, 2**32 - 64, 2**64 - 128]:
    rows = []
    for s in range(base, base + 128):
        r = random.Random(s)
        rows.append([r.getrandbits(32) for _ in range(8)])
    out["range8"][str(base)] = rows
out["range_long"] = {}
for s in [1000000 + 127, 2**32 - 1, 2**32 + 6, 2**64 - 1]:
    r = random.Random(s)
    out["range_long"][str(s)] = [r.getrandbits(32) for _ in range(1500)]
r = random.Random(42)
out["below"] = {str(m): [r.randrange(m) for _ in range(10)] for m in [1, 2, 3, 5, 7, 100, 1000003]}
with open(os.path.join(os.path.dirname(__file__), "golden.json"), "w") as f:
    json.dump(out, f, sort_keys=True)
    f.write("\n")
