"""hb.Collection: the features of a model over several tables
(hb_collection)."""

import numpy as np

from . import capi as _c
from ._arrays import _array, _memory, _user
from ._clib import POOLING_SUM  # noqa: F401
from ._errors import HbTypeError, HbValueError
from ._handle import _Handle
from .embedding import Embedding


class Collection(_Handle):
    """An embedding collection (hb_collection, hb.h): the
    features of a model over several :class:`Embedding` tables, looked up
    and updated with one collective call each (at most three exchanges per
    lookup, one per update that follows a lookup of the same ids). See
    docs/embedding-collections.md for the exact semantics.

    features: a list of ``(table, pooling)`` pairs or bare tables (pooling
    ``hb.POOLING_SUM``); pooling is ``hb.POOLING_NONE``, ``POOLING_SUM``,
    ``POOLING_MEAN`` or ``POOLING_SQRTN``. Several features may share a
    table. The collection keeps its tables alive; close it before them.

    A batch is a flat KeyedJaggedTensor, zero-copy:

    - ``values``: int64, every feature's ids, feature after feature;
    - ``offsets``: int64, ``num_features * B + 1`` entries: sample b of
      feature f has ``values[offsets[f*B+b]:offsets[f*B+b+1]]`` (B may be
      0, and may differ per rank);
    - ``weights``: None, or float32 with one weight per entry of values.

    Pooled features go to one ``(B, pooled_width)`` float32 matrix, feature
    f at columns ``column(f) : column(f) + dim(f)``. Pooling-NONE features
    produce one row per id: their rows, concatenated in feature order, go
    to the ``unpooled`` float32 array (``unpooled_size(offsets)`` elements;
    ``unpooled_views`` splits it per feature).

    GPU tables (``device >= 0``: every table on the context's GPU, mixing
    is refused by libhb): values, offsets, weights, out, unpooled, grad_out
    and grad_unpooled are CUDA arrays (``__cuda_array_interface__``,
    C-contiguous); ``out`` (and ``unpooled`` with pooling-NONE features)
    must be passed, since hb allocates no device memory, and with
    pooling-NONE features ``host_offsets``, a host copy of offsets, splits
    the unpooled rows (hb reads no device memory on the host; it must equal
    offsets). The work is enqueued on the context's CUDA stream. Host arrays
    to a GPU collection and CUDA arrays to a host one are an
    :class:`HbDeviceError`.
    """

    _destroy = staticmethod(_c.hb_collection_destroy)

    def __init__(self, ctx, features):
        tables, pooling = [], []
        for f in features:
            t, p = (f, POOLING_SUM) if isinstance(f, Embedding) else (None, None)  # noqa: F821
            if isinstance(f, (tuple, list)) and len(f) == 2:
                t, p = f
            if not isinstance(t, Embedding):
                raise HbTypeError("features: expected Embedding or (Embedding, pooling), got %r" % (f,))
            tables.append(t)
            pooling.append(int(p))
        handles = np.array([t._handle for t in tables], dtype=np.int64)
        self._pending = None  # (the flat batch in C, the arrays) of lookup_start
        super().__init__(_c.hb_collection_create(ctx._handle, handles,
                                                 np.array(pooling, dtype=np.int64), len(tables)))
        self._tables = tables  # keep them alive
        self._ctx = ctx
        ctx._children.add(self)
        self.device = tables[0].device  # libhb refused a mix of host and GPU tables
        self.num_features = len(tables)
        self.pooled_width = _c.hb_collection_pooled_width(self._h)
        self._cols = [_c.hb_collection_feature_column(self._h, f) for f in range(len(tables))]
        self._dims = [_c.hb_collection_feature_dim(self._h, f) for f in range(len(tables))]
        self._none = [f for f in range(len(tables)) if self._cols[f] < 0]

    def column(self, f):
        """Column of feature f in the pooled output (-1: pooling NONE)."""
        return self._cols[f]

    def dim(self, f):
        """Row width of feature f's table."""
        return self._dims[f]

    def _arg(self, x, param, dtype, writable=False):
        """x checked, in the collection's memory (CUDA arrays for GPU tables)."""
        return _memory(_array(x, param, dtype, writable=writable, device=True), param, self.device, "collection")

    def _batch(self, values, offsets, weights, host_offsets):
        """(values, offsets, weights, B, offsets on the host): the host
        offsets split the unpooled rows; a GPU collection's come from
        host_offsets (None without pooling-NONE features: nothing to split)."""
        for t in self._tables:  # a closed table would be freed memory in C
            if t.closed:
                raise HbValueError("Collection: one of its tables is closed")
        values = self._arg(values, "values", np.int64)
        offsets = self._arg(offsets, "offsets", np.int64)
        nf = self.num_features
        if len(offsets.shape) != 1 or offsets.size < 1 or (offsets.size - 1) % nf:
            raise HbValueError("offsets: expected num_features * B + 1 = %d * B + 1 entries, got %d"
                               % (nf, offsets.size))
        b = (offsets.size - 1) // nf
        if weights is not None:
            weights = self._arg(weights, "weights", np.float32)
        if self.device < 0:
            host_offsets = offsets
        elif host_offsets is not None:
            host_offsets = _array(host_offsets, "host_offsets", np.int64)
            if host_offsets.shape != offsets.shape:
                raise HbValueError("host_offsets: %d entries, offsets has %d (pass a host copy of offsets)"
                                   % (host_offsets.size, offsets.size))
        elif self._none:
            raise HbValueError("host_offsets: this GPU collection has pooling-NONE features; pass a host "
                               "copy of offsets (numpy) to split their rows (hb reads no device memory "
                               "on the host)")
        if host_offsets is not None:  # device arrays: libhb checks the bags on the device
            end = int(host_offsets[-1])
            if end > values.size:
                raise HbValueError("values: offsets end at %d, values has %d" % (end, values.size))
            if weights is not None and weights.size < end:
                raise HbValueError("weights: needs %d elements, the array has %d" % (end, weights.size))
        return values, offsets, weights, b, host_offsets

    def unpooled_size(self, offsets):
        """Elements of the unpooled rows of a batch with these (host) offsets."""
        return sum(n * self._dims[f] for f, n in self._none_counts(offsets))

    def _none_counts(self, offsets):
        """(feature, id count) of the pooling-NONE features."""
        if not self._none:
            return []
        b = (len(offsets) - 1) // self.num_features
        return [(f, int(offsets[(f + 1) * b] - offsets[f * b])) for f in self._none]

    def unpooled_views(self, buf, offsets):
        """Per feature, an (n_f, dim) view of buf for pooling-NONE features
        (None for pooled ones)."""
        views, at = [None] * self.num_features, 0
        for f, n in self._none_counts(offsets):
            views[f] = buf[at:at + n * self._dims[f]].reshape(-1, self._dims[f])
            at += n * self._dims[f]
        return views

    def _rows(self, arr, host_offsets, param, writable):
        """(the unpooled rows or their gradient, row_starts for the C call)."""
        if not self._none and arr is None:
            return None, None
        starts, at = np.full(self.num_features, -1, np.int64), 0
        for f, n in self._none_counts(host_offsets):
            starts[f] = at
            at += n * self._dims[f]
        if arr is None:  # there are pooling-NONE features
            if not writable:
                raise HbValueError("%s: the collection has pooling-NONE features; pass their rows" % param)
            if self.device >= 0:
                raise HbValueError("%s: a GPU collection writes the pooling-NONE rows into a CUDA array you "
                                   "pass (%d float32); hb allocates no device memory" % (param, at))
            return np.empty(at, dtype=np.float32), starts
        arr = self._arg(arr, param, np.float32, writable)
        if arr.size != at:
            raise HbValueError("%s: needs %d elements, the array has %d" % (param, at, arr.size))
        return (arr, starts) if self._none else (None, None)

    def _lookup_args(self, values, offsets, weights, out, unpooled, host_offsets):
        """The C lookup's arguments after the handle, checked; out and
        unpooled allocated when None (host tables)."""
        values, offsets, weights, b, host_offsets = self._batch(values, offsets, weights, host_offsets)
        want = b * self.pooled_width
        if out is None:
            if self.device >= 0:
                raise HbValueError("out: a GPU collection writes into a CUDA array you pass (%d x %d float32); "
                                   "hb allocates no device memory" % (b, self.pooled_width))
            out = np.empty((b, self.pooled_width), dtype=np.float32)
        else:
            out = self._arg(out, "out", np.float32, writable=True)
            if out.size != want:
                raise HbValueError("out: needs %d x %d elements, the array has %d"
                                   % (b, self.pooled_width, out.size))
        unpooled, starts = self._rows(unpooled, host_offsets, "unpooled", True)
        return b, values, offsets, weights, out, unpooled, starts

    def _lookup_done(self, out, unpooled):
        self.last_unpooled = None if unpooled is None else _user(unpooled)
        return _user(out)

    def _not_started(self, call):
        if self._pending is not None:
            raise HbValueError("%s: a lookup started by lookup_start() is pending on this collection; "
                               "call lookup_wait() first (only apply_gradients may come in between)" % call)

    def lookup(self, values, offsets, weights=None, out=None, unpooled=None, host_offsets=None):
        """Collective. Returns the pooled (B, pooled_width) float32 matrix
        (``out`` when given); pooling-NONE rows go to ``unpooled`` (allocated
        when None on the host, and kept as ``self.last_unpooled``). GPU
        tables: CUDA arrays, ``out`` (and ``unpooled``) required."""
        self._not_started("lookup")
        args = self._lookup_args(values, offsets, weights, out, unpooled, host_offsets)
        _c.hbpy_collection_lookup(self._handle, *args)
        return self._lookup_done(args[4], args[5])

    def lookup_start(self, values, offsets, weights=None, out=None, unpooled=None, host_offsets=None):
        """Collective: the first half of :meth:`lookup` (the ids are checked,
        deduplicated and sent to their owners); :meth:`lookup_wait` finishes
        it and returns the pooled matrix. The arguments are as lookup's; the
        collection keeps them alive until the wait, and they must not be
        modified in between (libhb reads the batch and writes out /
        unpooled in the wait). Between start and wait only
        :meth:`apply_gradients` (of the batch looked up before) may be
        called on this collection; a second start or a lookup is an
        :class:`HbValueError`. Results are bit-identical to lookup after the
        update (hb.h: hb_collection_lookup_start). A failed start leaves
        nothing started."""
        self._not_started("lookup_start")
        args = self._lookup_args(values, offsets, weights, out, unpooled, host_offsets)
        pending = _c.hbpy_collection_lookup_start(self._handle, *args)
        self._pending = (pending, args)

    def lookup_wait(self):
        """Collective: finishes the lookup started by :meth:`lookup_start`
        and returns its pooled (B, pooled_width) matrix (pooling-NONE rows in
        ``self.last_unpooled``, as lookup). The GIL is released while it
        waits. Afterwards nothing is started, whether it succeeded or
        raised (e.g. a lost peer)."""
        if self._pending is None:
            raise HbValueError("lookup_wait: no lookup started on this collection (call lookup_start() first)")
        handle = self._handle  # a closed collection has dropped its lookup
        pending, args = self._pending
        self._pending = None
        _c.hbpy_collection_lookup_wait(handle, pending)
        return self._lookup_done(args[4], args[5])

    def close(self):
        """Free the collection (not collective); a started lookup is
        dropped."""
        pending, self._pending = getattr(self, "_pending", None), None
        super().close()  # hb_collection_destroy drops the started lookup first
        if pending is not None:
            _c.hbpy_collection_pending_free(pending[0])

    def apply_gradients(self, values, offsets, grad_out, weights=None, grad_unpooled=None, host_offsets=None,
                        dense=None, dense_out=None):
        """Collective: grad_out is the gradient of the pooled output (B x
        pooled_width float32), grad_unpooled that of the unpooled rows. Reuses
        the last lookup's plan when every rank passes the same ids. GPU
        tables: CUDA arrays.

        dense: None, or a float32 numpy array (host memory; the dense
        gradients) summed over the ranks in the update's own exchange
        (hb_collection_apply_gradients_dense: no round of its own, the same
        bits as ``Context.allreduce``); in place, or into dense_out (a
        writable float32 array of as many elements). Every rank passes one
        of the same size, or none. Returns the summed array (None without
        dense)."""
        values, offsets, weights, b, host_offsets = self._batch(values, offsets, weights, host_offsets)
        grad_out = self._arg(grad_out, "grad_out", np.float32)
        if grad_out.size != b * self.pooled_width:
            raise HbValueError("grad_out: needs %d x %d elements, the array has %d"
                               % (b, self.pooled_width, grad_out.size))
        grad_unpooled, starts = self._rows(grad_unpooled, host_offsets, "grad_unpooled", False)
        if dense is None:
            if dense_out is not None:
                raise HbValueError("dense_out: given without dense")
            _c.hbpy_collection_apply_gradients(self._handle, b, values, offsets, weights, grad_out,
                                               grad_unpooled, starts)
            return None
        dense = _array(dense, "dense", np.float32, writable=dense_out is None)
        out = dense if dense_out is None else _array(dense_out, "dense_out", np.float32, writable=True)
        if out.size != dense.size:
            raise HbValueError("dense_out: needs %d elements (as dense), the array has %d"
                               % (dense.size, out.size))
        _c.hbpy_collection_apply_gradients_dense(self._handle, b, values, offsets, weights, grad_out,
                                                 grad_unpooled, starts, dense, out, dense.size)
        return _user(out)

    _STATS = ("lookups", "updates", "reused_plans", "rounds", "ids", "unique_ids",
              "owner_unique", "wire_bytes_sent", "wire_bytes_recv", "dedup_bound_bytes")

    def stats(self):
        """This rank's counters (hb_collection_stats) as a dict."""
        a = np.zeros(len(self._STATS), dtype=np.uint64)
        _c.hb_collection_get_stats(self._handle, a)
        return {k: int(v) for k, v in zip(self._STATS, a)}
