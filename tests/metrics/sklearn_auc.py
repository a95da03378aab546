"""Reference AUC / GAUC with scikit-learn, for auc_test.cc.

For each file argument, reads rows of (float32 label, float32 pred, float32
weight, float64 group) and prints one line: roc_auc_score, then GAUC
unweighted, by impressions, by clicks (per-group roc_auc_score over groups
with both classes). Exits with status 3 when scikit-learn is missing.
"""
import sys

try:
    import numpy as np
    from sklearn.metrics import roc_auc_score
except ImportError:
    sys.exit(3)


def scores(path):
    rows = np.fromfile(path, dtype=[("l", "<f4"), ("p", "<f4"), ("w", "<f4"), ("g", "<f8")])
    l, p, w, g = (rows[k].astype(np.float64) for k in ("l", "p", "w", "g"))
    out = [roc_auc_score(l != 0, p, sample_weight=w)]
    for weighting in range(3):
        num = den = 0.0
        for gid in np.unique(g):
            m = g == gid
            pos = w[m][l[m] != 0].sum()
            neg = w[m][l[m] == 0].sum()
            if pos == 0 or neg == 0:
                continue
            auc = roc_auc_score(l[m] != 0, p[m], sample_weight=w[m])
            weight = [1.0, pos + neg, pos][weighting]
            num += weight * auc
            den += weight
        out.append(num / den if den else 0.0)
    return out


for path in sys.argv[1:]:
    print(" ".join(repr(float(x)) for x in scores(path)))
