"""criteo-synth in numpy: the same samples as examples/ctr_train/synth_data.h.

Every hash is the C++ one on numpy uint64 arrays (wrapping arithmetic), so
ids and labels match the C++ generator exactly; a batch of samples is made
with whole-array operations over every table / dense feature at once, in
the C++ summation order.
"""

import ctypes
import math
import os
import sys
import threading

import numpy as np

TABLES = 26
DENSE = 13

_U64 = np.uint64


_GOLDEN = _U64(0x9E3779B97F4A7C15)  # splitmix64's increment
_MASK64 = (1 << 64) - 1


def mix(x):
    """splitmix64 finaliser on a uint64 array (or scalar)."""
    x = np.asarray(x, dtype=_U64)
    if x.ndim == 0:  # as a 1-element array: numpy warns on a scalar's wrap-around
        return _mix_into(x.reshape(1) + _GOLDEN)[0]
    return _mix_into(x + _GOLDEN)  # a new array: x is the caller's


_M1, _M2 = _U64(0xBF58476D1CE4E5B9), _U64(0x94D049BB133111EB)
_S11, _S30, _S27, _S31 = _U64(11), _U64(30), _U64(27), _U64(31)
_UNIT = 1.0 / 9007199254740992.0  # 2^-53


def _mix_into(x, t=None, add_golden=False):
    """mix's steps after the add of _GOLDEN (with add_golden: from it), in
    place on x (a uint64 array of the caller's); the shifts go to t (x's
    shape; None: a new array) instead of a temporary per step (sample()
    calls this on every hash of a batch, with _GOLDEN folded into its
    salts: the adds wrap mod 2^64)."""
    if add_golden:
        x += _GOLDEN
    t = np.right_shift(x, _S30, out=t)
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
    return (np.asarray(h, dtype=_U64) >> _S11).astype(np.float64) * _UNIT


def gauss(h):
    """Box-Muller from two hashes."""
    h = np.array(h, dtype=_U64)  # a copy: _gauss_into overwrites it
    return _gauss_into(h.reshape(-1)).reshape(h.shape)[()]  # a scalar's is a scalar


def _unit_to(h, out=None):
    """unit(h) of a uint64 array of the caller's, which it overwrites, into
    out (float64, h's shape; None: a new array): one multiply converts
    (exactly: h >> 11 < 2^53) and scales, as unit's astype and product;
    from int64 (the same values), which converts in fewer instructions
    than uint64."""
    np.right_shift(h, _S11, out=h)
    return np.multiply(h.view(np.int64), _UNIT, out=out)


def _gauss_into(h, s=None):
    """gauss(h) of a uint64 array of the caller's, which it overwrites: the
    same operations in place (a product's operands swapped, which IEEE
    rounding does not see); with s (sample()'s _Scratch, h (DENSE, n)) in
    its work arrays, the result in s.u1."""
    g = np.add(h, _GOLDEN, out=None if s is None else s.g)  # mix(h), h kept
    _mix_into(g, None if s is None else s.shift[:DENSE])
    u2 = _unit_to(g, None if s is None else s.u2)
    u1 = _unit_to(h, None if s is None else s.u1)
    np.maximum(u1, 1e-300, out=u1)
    u2 *= 6.283185307179586
    return _box_muller(u1, u2)


def _box_muller(u1, u2):
    """sqrt(-2 log u1) * cos(u2) in place in u1 (u1 clamped to 1e-300, u2
    scaled by 2 pi: the exact steps, which the native helper also makes):
    the numpy ufuncs whose rounding fixes the dense features' bits."""
    np.log(u1, out=u1)
    u1 *= -2.0
    np.sqrt(u1, out=u1)
    np.cos(u2, out=u2)
    u1 *= u2
    return u1


NATIVE_LIB = "libctr_synth_native.so"
# Vocabularies from which the native helper reads its planted weights by
# rank, sample by sample (8192 ids: 26 x 64 KB of weights, still in a
# core's L2; 16384 and up, by rank cost less).
NATIVE_BY_RANK = 16384


def load_native(path=None):
    """The demo's native helper (synth_native.cc, built next to the hb
    package): its ctr_synth_hash as a ctypes function (ctypes releases the
    GIL for the call), from path or from the first sys.path entry that
    holds NATIVE_LIB; None when no entry does (a path given must load)."""
    if path is None:
        path = next((c for c in (os.path.join(d or ".", NATIVE_LIB) for d in sys.path)
                     if os.path.isfile(c)), None)
        if path is None:
            return None
    fn = ctypes.CDLL(os.path.abspath(path)).ctr_synth_hash
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    fn.argtypes = [ctypes.c_uint64, ctypes.c_int, i64, i64, i64, ctypes.c_int, ptr, ptr, ptr,
                   ctypes.c_int, ptr, i64, i64, ptr, ptr, ptr, ptr]
    fn.restype = ctypes.c_int
    return fn


class Samples:
    """A batch of n samples, as arrays."""

    def __init__(self, ids, dense, label, planted_prob):
        self.ids = ids                    # (n, TABLES) int64 (Generator's: a (TABLES, n) array's .T)
        self.dense = dense                # (n, DENSE) float32 (Generator's: a view, as ids)
        self.label = label                # (n,) float32, 0 or 1
        self.planted_prob = planted_prob  # (n,) float32


class Generator:
    """Sample i of a split depends only on (seed, split, i)."""

    def __init__(self, seed, vocab, alpha=1.1, native=None):
        """native: load_native()'s function, or None: sample_into makes the
        hashes, ranks, ids and uniforms in one call of it (the same values:
        integer arithmetic and exact conversions) instead of numpy passes."""
        if vocab <= 0 or vocab & (vocab - 1):
            raise ValueError("vocab: must be a power of two, got %d" % vocab)
        self.seed = _U64(seed)
        self.vocab = vocab
        # Zipf(alpha) CDF over ranks 1..vocab, summed in order with libm's
        # pow as in C++ (np.cumsum adds sequentially).
        terms = np.array([math.pow(k + 1.0, -alpha) for k in range(vocab)])
        cdf = np.cumsum(terms)
        self._cdf = cdf / cdf[-1]  # the last is exactly 1.0 (x / x)
        # sample() compares a table's hash h (u = (h >> 11) * 2^-53) with
        # the CDF in integers: u > c exactly when h >> 11 > floor(c * 2^53)
        # (an integer against a real; the scaling is exact), that is when
        # h > floor(c * 2^53) << 11 | 0x7ff; for c = 1, never (2^64 - 1).
        # So the tables' uniforms are never made.
        c53 = np.floor(self._cdf * 9007199254740992.0).astype(_U64)
        self._cdf_h = np.where(c53 >> _U64(53) != 0, _U64(0xFFFFFFFFFFFFFFFF),
                               (c53 << _S11) | _U64(0x7FF))
        # The inverse CDF by buckets: u in bucket k = [k / K, (k + 1) / K)
        # (K a power of two: k = h >> (64 - log2 K) exactly) has between
        # below[k] and below[k + 1] CDF entries under it. With at most one
        # entry in the bucket, the rank is below[k] + (u > cdf[below[k]]):
        # two table reads and a compare, no search. Buckets with more are
        # searched (_multi: none up to vocab 8192 with K = 16 * vocab; 3 %
        # of the uniforms at 131072, K = 2^20). K is what keeps the tables
        # (K int64s and K uint64s) in cache beside the training step.
        self._buckets = min(16 * vocab, 1 << 20)
        self._kshift = _U64(64 - (self._buckets.bit_length() - 1))
        edges = np.arange(self._buckets + 1, dtype=np.float64) / self._buckets
        below = np.searchsorted(self._cdf, edges, side="left")
        self._below = below[:-1].astype(np.int64)
        self._cand = self._cdf_h[np.minimum(self._below, vocab - 1)]  # below[k] < vocab: cdf[-1] = 1
        multi = below[1:] - below[:-1] > 1
        self._multi = multi if multi.any() else None
        # Planted weights by (table, rank), flat: sample() reads them at
        # t * vocab + rank, and makes the ids from the same index.
        self._table_base = (np.arange(TABLES, dtype=np.int64) * vocab)[:, None]
        self._table_add = (np.arange(TABLES, dtype=_U64) * _U64(7919))[:, None]
        # Planted weights of every (table, id), and of the dense features.
        mixed_ids = mix(np.arange(vocab, dtype=_U64))
        weight = np.empty((TABLES, vocab))
        for t in range(TABLES):
            weight[t] = 0.3 * gauss(mix(self.seed ^ mix(_U64(0x5EED0000 + t)) ^ mixed_ids))
        ranks = np.arange(vocab, dtype=np.int64) + self._table_base
        # Negated, as sample() sums the logit's terms: -logit directly (IEEE
        # rounding is symmetric, so the same bits as the negated sum).
        self._neg_weight_of_rank = -np.take(weight, self._ids_of(ranks) + self._table_base)
        self._weight = weight
        self._dense_weight = np.array(
            [0.5 * gauss(mix(self.seed ^ _U64(0xDEAD + j))) for j in range(DENSE)])
        self._neg_dense_weight_col = -self._dense_weight[:, None]
        # sample()'s hash keys in its rows' order (the tables', the dense
        # features', the label's): the salts plus mix's increment, so it
        # hashes base + salt with one add (uint64 adds wrap: the same sum).
        table_salt = 2 * np.arange(TABLES, dtype=_U64) + _U64(1)
        dense_salt = np.arange(DENSE, dtype=_U64) + _U64(1000)
        self._keys = (np.concatenate([table_salt, dense_salt, np.array([4242], dtype=_U64)])
                      + _GOLDEN)[:, None]
        self._local = threading.local()  # per thread: sample()'s _Scratch
        self.native = native
        if native is not None:
            if vocab >= 1 << 32:
                raise ValueError("vocab: the native helper takes up to 2^32 - 1 ids, got %d"
                                 % vocab)
            # The helper's tables, as the C++ generator's (gen2): at most
            # 2^16 buckets (uint32 bounds, 256 KB; the helper searches the
            # buckets of several CDF entries, 15 % of the hashes at vocab
            # 131072), against the numpy path's 2^20 (4 MB as uint32, read at
            # random); from NATIVE_BY_RANK ids on, the planted weights by
            # rank, a rank's 26 tables side by side (the hot ranks share
            # cache lines), and the batch made sample by sample with its
            # loads started early. Up to it the tables fit in cache and the
            # numpy path's table-major weights and passes cost less.
            buckets = min(16 * vocab, 1 << 16)
            edges = np.arange(buckets + 1, dtype=np.float64) / buckets
            self._below32 = np.searchsorted(self._cdf, edges, side="left").astype(np.uint32)
            by_rank = vocab >= NATIVE_BY_RANK
            weight = self._neg_weight_of_rank
            if by_rank:
                weight = self._neg_weight_by_rank = np.ascontiguousarray(weight.T)
            self._native_tables = (vocab, 64 - (buckets.bit_length() - 1)) + tuple(
                a.ctypes.data for a in (self._below32, self._cdf_h, weight)) + (int(by_rank),)

    def rank_of(self, u):
        """The Zipf rank (0-based) of each uniform u in [0, 1):
        np.searchsorted(cdf, u, side="left"), which sample() computes from
        its bucket tables."""
        return np.searchsorted(self._cdf, u, side="left")

    def _ids_of(self, rank, out=None):
        """The ids (int64; into out, rank's shape, or a new array) of
        (TABLES, n) flat ranks t * vocab + rank (int64): C++'s bijection on
        [0, vocab) per table, (rank * 0x9e3779b1 + t * 7919) & (vocab - 1),
        in uint64 arithmetic; t * vocab times the odd multiplier is a
        multiple of vocab, which the mask drops."""
        ids = np.multiply(rank.view(_U64), _U64(0x9E3779B1),
                          out=None if out is None else out.view(_U64))
        ids += self._table_add
        ids &= _U64(self.vocab - 1)
        return ids.view(np.int64)

    def weight(self, t, ids):
        return self._weight[t, ids]

    def dense_weight(self, j):
        return self._dense_weight[j]

    def _scratch(self, n):
        """This thread's work arrays for batches of n samples (the prefetch
        thread and the main thread sample at once; Samples' arrays are the
        caller's). A few sizes are kept: a prefetched batch's chunks, a
        whole batch and the evaluation's alternate on one thread."""
        cache = getattr(self._local, "s", None)
        if cache is None:
            cache = self._local.s = {}
        s = cache.get(n)
        if s is None:
            if len(cache) >= 4:
                cache.pop(next(iter(cache)))
            s = cache[n] = _Scratch(n)
        return s

    def sample(self, split, begin, end):
        """Samples [begin, end) of split (0: train, 1: held out), in new
        arrays (sample_into's)."""
        out = new_samples(max(0, end - begin))
        self.sample_into(split, begin, end, out)
        return out

    def sample_into(self, split, begin, end, out, at=0):
        """Samples [begin, end) of split (0: train, 1: held out) into rows
        [at, at + end - begin) of out (a Samples of new_samples'): every
        hash of the batch (the tables', the dense features', the label's)
        as one (TABLES + DENSE + 1, n) array, hashed in place in reused
        work arrays (no numpy error state to switch: array arithmetic
        wraps silently); per value the C++ operations, so the same
        samples, whatever rows of out they go to (the prefetch fills a
        batch in chunks). Each numpy call costs ~1 us whatever its size,
        so the batch is a few dozen calls over whole arrays. With native,
        the hashes, ranks, ids, weights and uniforms come from one call of
        it (synth_native.cc: the same values) and numpy makes the rest."""
        n = max(0, end - begin)
        if n == 0:
            return
        s = self._scratch(n)
        cols = slice(at, at + n)
        terms = s.terms  # row 0 is +1: the logit's -1, negated
        if self.native is not None:
            ids = out.ids[at:]
            if ids.shape[0] < n or ids.dtype != np.int64:  # C writes n rows there
                raise ValueError("sample_into: out has %d int64 rows from %d, %d wanted"
                                 % (out.ids.shape[0], at, n))
            if self.native(int(self.seed), split, begin, n, *self._native_tables,
                            ids.ctypes.data, ids.strides[0] // 8, ids.strides[1] // 8,
                            *s.native_args()) != 0:
                raise ValueError("ctr_synth_hash refused samples [%d, %d) of vocab %d"
                                 % (begin, end, self.vocab))
            gauss, u_label = _box_muller(s.u1, s.u2), s.ul
        else:
            gauss, u_label = self._hash_numpy(split, begin, end, s, out, cols)
        dense = out.dense.T[:, cols]
        dense[...] = gauss  # float64 -> float32 as astype
        # The logit's terms, negated, in the C++ order (-1, the tables', the
        # dense features'), one row per term, summed left to right as C++ does:
        # a reduction over the rows of a C-ordered array adds row after row
        # (the pairwise summation is only along the contiguous axis).
        np.multiply(self._neg_dense_weight_col, dense, out=terms[1 + TABLES:])
        p = np.add.reduce(terms, axis=0, out=s.p)  # -logit; then 1 / (1 + exp(-logit)) in place
        np.exp(p, out=p)
        p += 1.0
        np.divide(1.0, p, out=p)
        np.less(u_label, p, out=out.label[cols])
        out.planted_prob[cols] = p

    def _hash_numpy(self, split, begin, end, s, out, cols):
        """sample_into's hashes in numpy: the ids into out, the negated
        planted weights into s.terms; the dense features (float64) and the
        label's uniforms."""
        if end <= 1 << 56:  # the index's xor with split << 56 is an add: one add for both and mix's
            base = _mix_into(np.add(s.iota, _U64((begin + (split << 56) + int(_GOLDEN)) & _MASK64),
                                    out=s.base), s.shift[0])
        else:
            index = np.add(s.iota, _U64(begin), out=s.base)
            index ^= _U64(split << 56)
            base = _mix_into(index, s.shift[0], add_golden=True)
        base ^= self.seed
        _mix_into(base, s.shift[0], add_golden=True)
        # One row per hash, table after table: the ids come out in the
        # layout the planted weights are read in and the collection's flat
        # batch takes (Samples.ids and .dense are (n, ...) views of them).
        h = _mix_into(np.add(self._keys, base, out=s.h), s.shift)
        ht = h[:TABLES]
        # The tables' Zipf ranks, from bucket k of each hash.
        k = np.right_shift(ht, self._kshift, out=s.k).view(np.int64)
        # Indices in range: mode "wrap" does not buffer out (as "raise"
        # does) and costs fewer instructions than "clip".
        rank = np.take(self._below, k, out=s.rank, mode="wrap")
        np.greater(ht, np.take(self._cand, k, out=s.cand, mode="wrap"), out=s.bit)
        rank += s.bit
        if self._multi is not None:
            at = np.flatnonzero(np.take(self._multi, k, out=s.bit, mode="wrap"))
            if at.size:
                rank.reshape(-1)[at] = np.searchsorted(self._cdf_h, ht.reshape(-1)[at], side="left")
        rank += self._table_base
        self._ids_of(rank, out=out.ids.T[:, cols])
        np.take(self._neg_weight_of_rank, rank, out=s.terms[1:1 + TABLES], mode="wrap")
        gauss = _gauss_into(h[TABLES:TABLES + DENSE], s)
        return gauss, _unit_to(h[TABLES + DENSE], s.u2[0])


def new_samples(n):
    """Uninitialised Samples of n samples, in Generator.sample's layout: ids
    and dense are (n, ...) views of (TABLES, n) and (DENSE, n) arrays."""
    return Samples(np.empty((TABLES, n), np.int64).T, np.empty((DENSE, n), np.float32).T,
                   np.empty(n, np.float32), np.empty(n, np.float32))


class _Scratch:
    """Generator.sample's work arrays for batches of n samples."""

    def __init__(self, n):
        rows = TABLES + DENSE + 1
        self.n = n
        self.iota = np.arange(n, dtype=_U64)
        self.base = np.empty(n, _U64)
        self.h = np.empty((rows, n), _U64)  # every hash of the batch
        self.shift = np.empty((rows, n), _U64)  # _mix_into's shifts
        self.k = np.empty((TABLES, n), _U64)
        self.rank = np.empty((TABLES, n), np.int64)
        self.cand = np.empty((TABLES, n), _U64)
        self.bit = np.empty((TABLES, n), np.bool_)
        self.g = np.empty((DENSE, n), _U64)  # _gauss_into's second hash
        # _gauss_into's uniforms, two arrays: numpy's SIMD loops (log, cos)
        # fall back to ~8x slower code between two views of one array.
        self.u1, self.u2 = np.empty((DENSE, n)), np.empty((DENSE, n))
        self.terms = np.empty((1 + TABLES + DENSE, n))
        self.terms[0] = 1.0
        self.p = np.empty(n)
        self.ul = np.empty(n)  # the label's uniforms (native)
        self._addresses = None

    def native_args(self):
        """ctr_synth_hash's output addresses here: the tables' rows of
        terms, u1, u2, ul."""
        if self._addresses is None:
            self._addresses = (self.terms[1].ctypes.data, self.u1.ctypes.data,
                               self.u2.ctypes.data, self.ul.ctypes.data)
        return self._addresses
