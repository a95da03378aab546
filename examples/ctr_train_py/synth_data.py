"""criteo-synth in numpy: the same samples as examples/ctr_train/synth_data.h.

Every hash is the C++ one on numpy uint64 arrays (wrapping arithmetic), so
ids and labels match the C++ generator exactly; a batch of samples is made
with whole-array operations, one pass per table / dense feature, in the C++
summation order.
"""

import math

import numpy as np

TABLES = 26
DENSE = 13

_U64 = np.uint64


def mix(x):
    """splitmix64 finaliser on a uint64 array (or scalar)."""
    x = np.asarray(x, dtype=_U64)
    with np.errstate(over="ignore"):
        x = x + _U64(0x9E3779B97F4A7C15)  # a new array: x is the caller's
        x ^= x >> _U64(30)
        x *= _U64(0xBF58476D1CE4E5B9)
        x ^= x >> _U64(27)
        x *= _U64(0x94D049BB133111EB)
        x ^= x >> _U64(31)
    return x


def unit(h):
    """Top 53 bits of h as a double in [0, 1)."""
    return (np.asarray(h, dtype=_U64) >> _U64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def gauss(h):
    """Box-Muller from two hashes."""
    u1 = np.maximum(unit(h), 1e-300)
    u2 = unit(mix(h))
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(6.283185307179586 * u2)


class Samples:
    """A batch of n samples, as arrays."""

    def __init__(self, ids, dense, label, planted_prob):
        self.ids = ids                    # (n, TABLES) int64
        self.dense = dense                # (n, DENSE) float32
        self.label = label                # (n,) float32, 0 or 1
        self.planted_prob = planted_prob  # (n,) float32


class Generator:
    """Sample i of a split depends only on (seed, split, i)."""

    def __init__(self, seed, vocab, alpha=1.1):
        if vocab <= 0 or vocab & (vocab - 1):
            raise ValueError("vocab: must be a power of two, got %d" % vocab)
        self.seed = _U64(seed)
        self.vocab = vocab
        # Zipf(alpha) CDF over ranks 1..vocab, summed in order with libm's
        # pow as in C++ (np.cumsum adds sequentially).
        terms = np.array([math.pow(k + 1.0, -alpha) for k in range(vocab)])
        cdf = np.cumsum(terms)
        self._cdf = cdf / cdf[-1]
        # rank_of's table: u in bucket k = [k / K, (k + 1) / K) has between
        # below[k] and below[k + 1] CDF entries under it (K a power of two,
        # so k / K and u * K are exact).
        self._buckets = min(32 * vocab, 1 << 20)
        edges = np.arange(self._buckets + 1, dtype=np.float64) / self._buckets
        self._below = np.searchsorted(self._cdf, edges, side="left").astype(np.int32)
        # Planted weights of every (table, id), and of the dense features.
        ids = np.arange(vocab, dtype=_U64)
        mixed_ids = mix(ids)
        self._weight = np.empty((TABLES, vocab))
        for t in range(TABLES):
            self._weight[t] = 0.3 * gauss(mix(self.seed ^ mix(_U64(0x5EED0000 + t)) ^ mixed_ids))
        self._dense_weight = np.array(
            [0.5 * gauss(mix(self.seed ^ _U64(0xDEAD + j))) for j in range(DENSE)])
        # Per-table and per-feature constants of sample(), as row vectors.
        self._tables = np.arange(TABLES)
        self._table_salt = 2 * np.arange(TABLES, dtype=_U64) + _U64(1)
        self._table_add = np.arange(TABLES, dtype=_U64) * _U64(7919)
        self._dense_salt = np.arange(DENSE, dtype=_U64) + _U64(1000)

    def rank_of(self, u):
        """np.searchsorted(cdf, u, side="left") for u in [0, 1), the
        Zipf rank (0-based) of each uniform u: exact, from the bucket table
        where a bucket holds no CDF entry (most u), by binary search where
        it holds some."""
        k = (u * self._buckets).astype(np.int64)
        rank = self._below[k].astype(np.int64)
        open_ = rank != self._below[k + 1]
        rank[open_] = np.searchsorted(self._cdf, u[open_], side="left")
        return rank

    def weight(self, t, ids):
        return self._weight[t, ids]

    def dense_weight(self, j):
        return self._dense_weight[j]

    def sample(self, split, begin, end):
        """Samples [begin, end) of split (0: train, 1: held out): every
        table's (and dense feature's) hash as one (n, TABLES) array."""
        n = max(0, end - begin)
        index = np.arange(begin, begin + n, dtype=_U64)
        with np.errstate(over="ignore"):
            base = mix(self.seed ^ mix((_U64(split) << _U64(56)) ^ index))[:, None]
            u = unit(mix(base + self._table_salt))
            rank = np.minimum(self.rank_of(u), self.vocab - 1)
            ids = ((rank.astype(_U64) * _U64(0x9E3779B1) + self._table_add)
                   & _U64(self.vocab - 1)).astype(np.int64)
            dense = gauss(mix(base + self._dense_salt)).astype(np.float32)
            # The logit's terms in the C++ order (-1, the tables', the dense
            # features'), summed left to right as C++ does: one vector add
            # per term (np.add.accumulate along the rows does the same adds
            # but took ~3 ms a batch, a row at a time).
            terms = np.empty((n, 1 + TABLES + DENSE))
            terms[:, 0] = -1.0
            terms[:, 1:1 + TABLES] = self._weight[self._tables, ids]
            np.multiply(self._dense_weight, dense, out=terms[:, 1 + TABLES:])
            logit = terms[:, 0].copy()
            for j in range(1, terms.shape[1]):
                logit += terms[:, j]
            p = 1.0 / (1.0 + np.exp(-logit))
            label = (unit(mix(base[:, 0] + _U64(4242))) < p).astype(np.float32)
        return Samples(ids, dense, label, p.astype(np.float32))
