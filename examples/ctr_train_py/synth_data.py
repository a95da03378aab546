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


_GOLDEN = _U64(0x9E3779B97F4A7C15)  # splitmix64's increment


def mix(x):
    """splitmix64 finaliser on a uint64 array (or scalar)."""
    x = np.asarray(x, dtype=_U64)
    if x.ndim == 0:  # as a 1-element array: numpy warns on a scalar's wrap-around
        return _mix_into(x.reshape(1) + _GOLDEN)[0]
    return _mix_into(x + _GOLDEN)  # a new array: x is the caller's


_M1, _M2 = _U64(0xBF58476D1CE4E5B9), _U64(0x94D049BB133111EB)
_S30, _S27, _S31 = _U64(30), _U64(27), _U64(31)


def _mix_into(x):
    """mix's steps after the add of _GOLDEN, in place on x (a uint64 array
    of the caller's); one scratch array for the shifts instead of a
    temporary per step (sample() calls this on every table's hash of a
    batch, with _GOLDEN folded into its salts: the adds wrap mod 2^64)."""
    t = np.right_shift(x, _S30)
    x ^= t
    x *= _M1
    np.right_shift(x, _S27, out=t)
    x ^= t
    x *= _M2
    np.right_shift(x, _S31, out=t)
    x ^= t
    return x


def unit(h):
    """Top 53 bits of h as a double in [0, 1)."""
    return (np.asarray(h, dtype=_U64) >> _U64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def gauss(h):
    """Box-Muller from two hashes."""
    h = np.array(h, dtype=_U64)  # a copy: _gauss_into overwrites it
    return _gauss_into(h.reshape(-1)).reshape(h.shape)[()]  # a scalar's is a scalar


def _unit_into(h):
    """unit(h) of a uint64 array of the caller's, which it overwrites."""
    np.right_shift(h, _U64(11), out=h)
    u = h.astype(np.float64)
    u *= 1.0 / 9007199254740992.0
    return u


def _gauss_into(h):
    """gauss(h) of a uint64 array of the caller's, which it overwrites: the
    same operations in place (a product's operands swapped, which IEEE
    rounding does not see)."""
    u2 = _unit_into(mix(h))
    u1 = _unit_into(h)
    np.maximum(u1, 1e-300, out=u1)
    np.log(u1, out=u1)
    u1 *= -2.0
    np.sqrt(u1, out=u1)
    u2 *= 6.283185307179586
    np.cos(u2, out=u2)
    u1 *= u2
    return u1


class Samples:
    """A batch of n samples, as arrays."""

    def __init__(self, ids, dense, label, planted_prob):
        self.ids = ids                    # (n, TABLES) int64 (Generator's: a (TABLES, n) array's .T)
        self.dense = dense                # (n, DENSE) float32 (Generator's: a view, as ids)
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
        # rank_of's per-bucket lookup, one table: 2 * (the rank below the
        # bucket) + 1 if a CDF entry falls inside it (np.take of int64, no
        # conversion; one table read per u instead of two).
        self._below_open = 2 * self._below[:-1].astype(np.int64)
        self._below_open += self._below[:-1] != self._below[1:]
        # Planted weights of every (table, id), and of the dense features.
        ids = np.arange(vocab, dtype=_U64)
        mixed_ids = mix(ids)
        self._weight = np.empty((TABLES, vocab))
        for t in range(TABLES):
            self._weight[t] = 0.3 * gauss(mix(self.seed ^ mix(_U64(0x5EED0000 + t)) ^ mixed_ids))
        self._dense_weight = np.array(
            [0.5 * gauss(mix(self.seed ^ _U64(0xDEAD + j))) for j in range(DENSE)])
        # Per-table and per-feature constants of sample(), as row vectors.
        self._table_base = (np.arange(TABLES, dtype=np.int64) * vocab)[:, None]
        self._table_salt = 2 * np.arange(TABLES, dtype=_U64) + _U64(1)
        self._table_add = np.arange(TABLES, dtype=_U64) * _U64(7919)
        self._dense_salt = np.arange(DENSE, dtype=_U64) + _U64(1000)
        # sample()'s hash keys in its rows' order (the tables', the dense
        # features', the label's): the salts plus mix's increment, so it
        # hashes base + salt with one add (uint64 adds wrap: the same sum).
        self._keys = np.concatenate([self._table_salt, self._dense_salt,
                                     np.array([4242], dtype=_U64)]) + _GOLDEN

    def rank_of(self, u):
        """np.searchsorted(cdf, u, side="left") for u in [0, 1), the
        Zipf rank (0-based) of each uniform u: exact, from the bucket table
        where a bucket holds no CDF entry (most u), by binary search where
        it holds some."""
        k = (u * self._buckets).astype(np.int64)
        rank = np.take(self._below_open, k)
        open_ = (rank & 1).astype(np.bool_)
        rank >>= 1
        rank[open_] = np.searchsorted(self._cdf, u[open_], side="left")
        return rank

    def weight(self, t, ids):
        return self._weight[t, ids]

    def dense_weight(self, j):
        return self._dense_weight[j]

    def sample(self, split, begin, end):
        """Samples [begin, end) of split (0: train, 1: held out): every
        hash of the batch (the tables', the dense features', the label's)
        as one (TABLES + DENSE + 1, n) array, hashed in place (no numpy
        error state to switch: array arithmetic wraps silently); per value
        the C++ operations, so the same samples."""
        n = max(0, end - begin)
        index = np.arange(begin, begin + n, dtype=_U64)
        index ^= _U64(split) << _U64(56)
        base = mix(self.seed ^ mix(index))
        # One row per hash, table after table: the ids come out in the
        # layout the planted weights are read in and the collection's flat
        # batch takes (Samples.ids and .dense are (n, ...) views of them).
        h = _mix_into(np.add(self._keys[:, None], base))
        rank = self.rank_of(_unit_into(h[:TABLES]))
        np.minimum(rank, self.vocab - 1, out=rank)
        ids = rank.view(_U64)  # ranks are >= 0: the same values, in place
        ids *= _U64(0x9E3779B1)
        ids += self._table_add[:, None]
        ids &= _U64(self.vocab - 1)
        ids = ids.view(np.int64)
        dense = _gauss_into(h[TABLES:TABLES + DENSE]).astype(np.float32)
        # The logit's terms in the C++ order (-1, the tables', the dense
        # features'), one row per term, summed left to right as C++ does:
        # a reduction over the rows of a C-ordered array adds row after row
        # (the pairwise summation is only along the contiguous axis).
        terms = np.empty((1 + TABLES + DENSE, n))
        terms[0] = -1.0
        np.take(self._weight, ids + self._table_base, out=terms[1:1 + TABLES])
        np.multiply(self._dense_weight[:, None], dense, out=terms[1 + TABLES:])
        p = np.add.reduce(terms, axis=0)  # the logit; then 1 / (1 + exp(-logit)) in place
        np.negative(p, out=p)
        np.exp(p, out=p)
        p += 1.0
        np.divide(1.0, p, out=p)
        label = (_unit_into(h[TABLES + DENSE]) < p).astype(np.float32)
        return Samples(ids.T, dense.T, label, p.astype(np.float32))
