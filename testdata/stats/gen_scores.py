#!/usr/bin/python3
"""Writes scores.json: reference values for the graded-outcome statistics of
pipeline/analysis/stats (scores.go) and queries/stats.sql, computed
independently of forklab with Debian's python3-scipy (1.10), python3-mpmath
and python3-statsmodels:

- wilcoxon: scipy.stats.wilcoxon(d, zero_method="wilcox", correction=False,
  method="approx"), the test forklab reports as wilcoxon_p, for samples of
  paired score differences with zeros, ties and both signs;
- paired_t: the mean of d and scipy.stats.ttest_1samp(d).confidence_interval()
  (95%), the paired t interval (scipy's t quantile is good to about 1e-9);
- t975: Student's t quantile t(0.975; df) as a 40-digit mpmath root of the
  t distribution function (regularised incomplete beta), for df 1 to 100 —
  the table queries/stats.sql's t975 macro holds — and some larger df;
- holm: statsmodels.stats.multitest.multipletests(p, method="holm").

Run: /usr/bin/python3 testdata/stats/gen_scores.py (Debian's python3, where
apt-get install python3-scipy python3-statsmodels put the packages)."""
import json, os, random, warnings
import numpy as np
import mpmath as mp
from scipy import stats
from statsmodels.stats.multitest import multipletests

warnings.simplefilter("ignore")  # scipy warns about small samples and zeros

mp.mp.dps = 40

def t975(df):
    def cdf(t):
        x = mp.mpf(df) / (df + t * t)
        return 1 - mp.betainc(mp.mpf(df) / 2, mp.mpf(1) / 2, 0, x, regularized=True) / 2
    return float(mp.findroot(lambda t: cdf(t) - mp.mpf("0.975"), 2))

def rounded(x, decimals=12):
    """A score difference as forklab stores it (world.ScoreSpec.RoundDiff)."""
    return float(format(x, ".%df" % decimals)) + 0.0

rng = random.Random(24)
samples = {
    "textbook": [1.83, 0.5, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.3, -0.6, -1.1, 0.4],
    "zeros_and_ties": [0.5, 0.25, -0.25, 0, 0, 1, 0.5, 0.5, -1, 0.25, 0.75],
    "one_nonzero": [0, 0, 0.5, 0],
    "all_positive": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7],
    "symmetric": [-2, -1, 1, 2],
    "all_zero": [0, 0, 0],
    "single": [0.25],
    "two_equal": [0.5, 0.5],
    # toolloop-like: sides are shares of k facts, differences rounded as
    # forklab stores them, many zeros and ties.
    "facts": [rounded(rng.choice([0, 1, 2, 3, 4]) / 4 - rng.choice([0, 1, 2, 3]) / 3) if rng.random() < 0.4 else 0.0
              for _ in range(400)],
    # A judge's 1 to 10 with three replicas per side: differences of means.
    "judge": [rounded(sum(rng.randint(1, 10) for _ in range(3)) / 3 - sum(rng.randint(1, 10) for _ in range(3)) / 3, 11)
              for _ in range(150)],
    # Continuous, no ties, a small shift.
    "continuous": [rounded(rng.gauss(0.05, 0.3)) for _ in range(2000)],
}
wilcoxon, paired = [], []
for name, d in samples.items():
    a = np.array(d, dtype=float)
    nz = int(np.count_nonzero(a))
    if nz:
        r = stats.wilcoxon(a, zero_method="wilcox", correction=False, method="approx")
        p = float(r.pvalue)
    else:
        p = None  # scipy: nan; forklab: NULL
    wilcoxon.append({"name": name, "d": d, "n": nz, "p": p})
    mean = float(np.mean(a))
    if len(d) >= 2 and float(np.std(a)) > 0:
        ci = stats.ttest_1samp(a, 0).confidence_interval(0.95)
        lo, hi = float(ci.low), float(ci.high)
    elif len(d) >= 2:
        lo = hi = mean
    else:
        lo = hi = None
    paired.append({"name": name, "d": d, "mean": mean, "lo": lo, "hi": hi})

holm = []
for p in [[0.01, 0.04, 0.03, 0.2], [0.5], [0.001, 0.001, 0.02, 0.9, 0.04], [0.3, 0.2, 0.1],
          [rng.random() ** 3 for _ in range(60)]]:
    holm.append({"p": p, "adjusted": [float(x) for x in multipletests(p, method="holm")[1]]})

out = {
    "t975": [[df, t975(df)] for df in list(range(1, 101)) + [101, 150, 200, 500, 1000, 10000, 100000]],
    "wilcoxon": wilcoxon,
    "paired_t": paired,
    "holm": holm,
}
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "scores.json"), "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
