"""Single-process references the binding tests compare hb's results with,
computed here independently of libhb."""

import numpy as np


def exact_auc(labels, preds, weights=None):
    """ROC AUC over every (positive, negative) pair; ties count one half."""
    labels = np.asarray(labels, dtype=np.float64)
    preds = np.asarray(preds, dtype=np.float64)
    w = np.ones_like(labels) if weights is None else np.asarray(weights, dtype=np.float64)
    pos = labels > 0.5
    wp, wn = w[pos], w[~pos]
    pp, pn = preds[pos], preds[~pos]
    greater = (pp[:, None] > pn[None, :]).astype(np.float64)
    ties = (pp[:, None] == pn[None, :]).astype(np.float64)
    pairs = wp[:, None] * wn[None, :]
    return float(((greater + 0.5 * ties) * pairs).sum() / pairs.sum())


def samples(n, seed=42):
    """Labels, predictions (with ties) and weights, the same on every rank."""
    rng = np.random.default_rng(seed)
    labels = (rng.random(n) < 0.3).astype(np.float32)
    preds = np.round(rng.random(n) * 0.5 + labels * 0.3, 2).astype(np.float32)
    weights = (1.0 + rng.integers(0, 3, n)).astype(np.float32)
    return labels, preds, weights
