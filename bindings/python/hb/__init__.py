"""hb: hybrid data-parallel and embedding-sharded training (Python binding).

A thin layer over the SWIG module ``hb.capi`` (one call per function of
hb.h). Buffers are numpy arrays: a C-contiguous array of the right dtype is
passed to C without a copy; any other object is a TypeError (wrong type or
dtype) or ValueError (wrong layout or size) naming the parameter. Results
come back as numpy arrays. Every failing call raises :class:`HbError`
carrying the status and hb_last_error(). Handles (:class:`Context`,
:class:`Embedding`, :class:`Metric`) are context managers.

Constants are hb.h's without the ``HB_`` prefix: ``hb.FLOAT32``, ``hb.SUM``,
``hb.ERR_TIMEOUT``, ``hb.OPT_ADAGRAD``, ``hb.METRIC_AUC`` ...
"""

import collections
import math
import weakref

import numpy as np

from . import capi as _c
from ._errors import HbError

for _name in dir(_c):
    if _name.startswith("HB_") and isinstance(getattr(_c, _name), int):
        globals()[_name[3:]] = getattr(_c, _name)
del _name

__version__ = "%d.%d.%d" % (VERSION_MAJOR, VERSION_MINOR, VERSION_PATCH)  # noqa: F821

# numpy dtype -> hb dtype. bfloat16 has no numpy dtype: pass uint16 arrays
# with dtype=hb.BFLOAT16.
_HB_DTYPE = {
    np.dtype(np.float32): FLOAT32,  # noqa: F821
    np.dtype(np.float64): FLOAT64,  # noqa: F821
    np.dtype(np.float16): FLOAT16,  # noqa: F821
    np.dtype(np.int32): INT32,  # noqa: F821
    np.dtype(np.int64): INT64,  # noqa: F821
    np.dtype(np.uint8): UINT8,  # noqa: F821
}


# ---- Argument checks ---------------------------------------------------------

def _array(x, param, dtype=None, writable=False):
    """x itself when it can be handed to C without a copy; raises otherwise."""
    if not isinstance(x, np.ndarray):
        raise TypeError("%s: expected a numpy array, got %s" % (param, type(x).__name__))
    if dtype is not None and x.dtype != np.dtype(dtype):
        raise TypeError("%s: expected dtype %s, got %s" % (param, np.dtype(dtype), x.dtype))
    if not x.flags.c_contiguous:
        raise ValueError("%s: the array is not C-contiguous (use np.ascontiguousarray)" % param)
    if writable and not x.flags.writeable:
        raise ValueError("%s: the array is read-only" % param)
    return x


def _hb_dtype(arr, dtype, param):
    """The hb dtype of arr: inferred from its numpy dtype, or checked."""
    if dtype is None:
        try:
            return _HB_DTYPE[arr.dtype]
        except KeyError:
            raise TypeError(
                "%s: numpy dtype %s has no hb dtype (float32, float64, float16, int32, "
                "int64, uint8; bfloat16 as uint16 with dtype=hb.BFLOAT16)" % (param, arr.dtype)
            ) from None
    size = _c.hb_dtype_size(dtype)
    if size == 0:
        raise ValueError("%s: unknown hb dtype %r" % (param, dtype))
    if arr.dtype.itemsize != size or arr.dtype.kind not in "fiu":
        raise TypeError("%s: numpy dtype %s does not hold hb dtype %d" % (param, arr.dtype, dtype))
    return dtype


def _counts(x, param, n):
    """n 64-bit counts or offsets (a list or an int64 array), or None."""
    if x is None:
        return None
    a = np.ascontiguousarray(x, dtype=np.int64)
    if a.ndim != 1 or a.size != n:
        raise ValueError("%s: expected %d entries (one per rank), got shape %s" % (param, n, a.shape))
    return a


def _extent(counts, offsets):
    """Elements a counts/offsets layout spans."""
    if offsets is None:
        return int(counts.sum())
    return int(max((o + c for o, c in zip(offsets, counts)), default=0))


def _check_size(arr, want, param):
    if arr.size < want:
        raise ValueError("%s: needs %d elements, the array has %d" % (param, want, arr.size))


# ---- Library-wide calls --------------------------------------------------------

def version_number():
    """Version of the loaded libhb (MAJOR * 10000 + MINOR * 100 + PATCH)."""
    return _c.hb_version_number()


def build_info():
    """One line describing the build and the machine."""
    return _c.hb_build_info()


def status_name(status):
    """Constant name of a status, e.g. "HB_ERR_TIMEOUT"."""
    return _c.hb_status_name(status)


def last_error():
    """hb_last_error() of the calling thread (HbError.message holds it too)."""
    return _c.hb_last_error()


def dtype_size(dtype):
    """Bytes per element of an hb dtype; 0 for an unknown one."""
    return _c.hb_dtype_size(dtype)


def get_option(name):
    """Process-wide value of an option (default plus HB_<NAME>) as a string."""
    return _c.hb_context_get_option(None, name)


OptionInfo = collections.namedtuple("OptionInfo", "name type default doc")


def describe_option(index):
    """OptionInfo of option number index (HbError past the last one)."""
    return OptionInfo(*_c.hb_option_describe(index))


def options():
    """OptionInfo of every option, in documentation order."""
    out = []
    while True:
        try:
            out.append(describe_option(len(out)))
        except HbError as e:
            if e.status != ERR_INVALID_ARGUMENT:  # noqa: F821
                raise
            return out


def tf_config_build(task_type, task_id, worker_hosts, ps_hosts=(), has_evaluator=False):
    """A TF_CONFIG JSON document (as the seed's set_tf_config)."""
    return _c.hb_tf_config_build(task_type, task_id, list(worker_hosts), list(ps_hosts),
                                 int(bool(has_evaluator)))


def shard_range(num_items, num_shards, shard, strict=False):
    """(begin, end) of shard's contiguous, even share of num_items items."""
    begin, end = _c.hb_shard_range(num_items, num_shards, shard, int(bool(strict)))
    return begin, end


Placement = collections.namedtuple("Placement", "build_ensemble train_subnetworks build_subnetwork")


def _placement(fn, num_workers, worker_index, num_subnetworks, *extra):
    if num_subnetworks < 0:
        raise ValueError("num_subnetworks: must be >= 0, got %d" % num_subnetworks)
    build = np.zeros(num_subnetworks, dtype=np.int32)
    ensemble, train = fn(num_workers, worker_index, num_subnetworks, *extra, build)
    return Placement(bool(ensemble), bool(train), build.astype(bool))


def placement_replication(num_workers, worker_index, num_subnetworks):
    """AdaNet ReplicationStrategy answers for one worker (a Placement)."""
    return _placement(_c.hb_placement_replication, num_workers, worker_index, num_subnetworks)


def placement_round_robin(num_workers, worker_index, num_subnetworks, drop_remainder=False):
    """AdaNet RoundRobinStrategy answers for one worker (a Placement)."""
    return _placement(_c.hb_placement_round_robin, num_workers, worker_index, num_subnetworks,
                      int(bool(drop_remainder)))


# ---- Handles ----------------------------------------------------------------------

class _Handle:
    """Owns one C handle; close() (or leaving a with block) frees it."""

    _destroy = None

    def __init__(self, handle):
        self._h = handle

    @property
    def _handle(self):
        if not self._h:
            raise ValueError("%s is closed" % type(self).__name__)
        return self._h

    @property
    def closed(self):
        return not self._h

    def close(self):
        """Free the handle (not collective). Closing twice is fine."""
        h, self._h = self._h, 0
        if h:
            type(self)._destroy(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        if getattr(self, "_h", 0):
            self.close()


def _fill(struct, fields, what):
    for key, value in fields.items():
        if key in ("struct_size", "this", "thisown") or not hasattr(struct, key):
            raise TypeError("unknown %s field %r" % (what, key))
        setattr(struct, key, value)
    return struct


def _option_string(options):
    if options is None or isinstance(options, str):
        return options
    return ",".join("%s=%s" % (k, _option_value(v)) for k, v in options.items())


def _option_value(v):
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


class Context(_Handle):
    """A group of ranks (hb_context). Collective to create: every rank must.

    Every argument left at None is discovered (hbrun's HB_* variables, then
    TF_CONFIG, then a world of one). options: "name=value,..." or a dict.
    Closing a context first closes the embeddings and metrics made on it.
    """

    _destroy = staticmethod(_c.hb_context_destroy)

    def __init__(self, rank=None, world_size=None, local_rank=None, local_world_size=None,
                 rendezvous=None, options=None):
        fields = dict(rank=rank, world_size=world_size, local_rank=local_rank,
                      local_world_size=local_world_size, rendezvous=rendezvous,
                      options=_option_string(options))
        opts = _fill(_c.hb_context_options(),
                     {k: v for k, v in fields.items() if v is not None}, "context option")
        super().__init__(_c.hb_context_create(opts))
        self._listeners = []
        self._children = weakref.WeakSet()

    def close(self):
        for child in list(self._children):
            child.close()
        super().close()

    # Accessors.
    rank = property(lambda self: _c.hb_context_rank(self._handle))
    world_size = property(lambda self: _c.hb_context_world_size(self._handle))
    local_rank = property(lambda self: _c.hb_context_local_rank(self._handle))
    local_world_size = property(lambda self: _c.hb_context_local_world_size(self._handle))
    is_chief = property(lambda self: bool(_c.hb_context_is_chief(self._handle)))
    task_type = property(lambda self: _c.hb_context_task_type(self._handle))
    task_id = property(lambda self: _c.hb_context_task_id(self._handle))
    num_gpus = property(lambda self: _c.hb_context_num_gpus(self._handle))
    device = property(lambda self: _c.hb_context_device(self._handle))

    def get_option(self, name):
        """Current value of an option, as a string."""
        return _c.hb_context_get_option(self._handle, name)

    def set_option(self, name, value):
        """Set an option (type-checked: HbError ERR_CONFIG names both)."""
        _c.hb_context_set_option(self._handle, name, _option_value(value))

    def barrier(self, timeout_ms=0):
        _c.hb_context_barrier(self._handle, timeout_ms)

    def abort(self, reason):
        """Every rank's pending and later calls fail with ERR_ABORTED."""
        _c.hb_context_abort(self._handle, reason)

    def set_cuda_stream(self, stream):
        """A cudaStream_t as an integer (e.g. torch's stream.cuda_stream); None: own."""
        _c.hb_context_set_cuda_stream(self._handle, stream)

    def synchronize(self):
        _c.hb_context_synchronize(self._handle)

    def add_listener(self, event, fn):
        """fn(event, path) is called around checkpoint saves and loads.
        Exceptions it raises are printed, not propagated (they cannot cross C)."""
        self._listeners.append(fn)  # the C side holds a borrowed reference
        _c.hb_context_add_listener(self._handle, event, fn)

    def data_sync(self, has_data, drop_remainder=False):
        """(continue, feed_empty) for this step; see hb_data_sync."""
        cont, empty = _c.hb_data_sync(self._handle, int(bool(has_data)), int(bool(drop_remainder)))
        return bool(cont), bool(empty)

    # Collectives (same order on every rank). recv=None allocates the result;
    # pass recv=send to work in place.
    def _recv(self, recv, send, shape, param="recv"):
        if recv is None:
            return np.empty(shape, dtype=send.dtype)
        recv = _array(recv, param, send.dtype, writable=True)
        _check_size(recv, math.prod(shape), param)
        return recv

    def allreduce(self, send, recv=None, op=None, dtype=None):
        send = _array(send, "send")
        dt = _hb_dtype(send, dtype, "send")
        recv = self._recv(recv, send, send.shape)
        _c.hb_allreduce(self._handle, send, recv, send.size, dt, SUM if op is None else op)  # noqa: F821
        return recv

    def allgather(self, send, recv=None, dtype=None):
        send = _array(send, "send")
        dt = _hb_dtype(send, dtype, "send")
        recv = self._recv(recv, send, (self.world_size,) + send.shape)
        _c.hb_allgather(self._handle, send, recv, send.size, dt)
        return recv

    def allgatherv(self, send, recv_counts, recv=None, recv_offsets=None, dtype=None):
        send = _array(send, "send")
        dt = _hb_dtype(send, dtype, "send")
        world = self.world_size
        counts = _counts(recv_counts, "recv_counts", world)
        offsets = _counts(recv_offsets, "recv_offsets", world)
        recv = self._recv(recv, send, (_extent(counts, offsets),))
        _c.hb_allgatherv(self._handle, send, send.size, recv, counts, offsets, dt)
        return recv

    def alltoall(self, send, recv=None, dtype=None):
        send = _array(send, "send")
        dt = _hb_dtype(send, dtype, "send")
        world = self.world_size
        if send.size % world:
            raise ValueError("send: %d elements do not split into %d equal blocks" % (send.size, world))
        recv = self._recv(recv, send, send.shape)
        _c.hb_alltoall(self._handle, send, recv, send.size // world, dt)
        return recv

    def alltoallv(self, send, send_counts, recv_counts, recv=None, send_offsets=None,
                  recv_offsets=None, dtype=None):
        send = _array(send, "send")
        dt = _hb_dtype(send, dtype, "send")
        world = self.world_size
        scounts = _counts(send_counts, "send_counts", world)
        soffsets = _counts(send_offsets, "send_offsets", world)
        rcounts = _counts(recv_counts, "recv_counts", world)
        roffsets = _counts(recv_offsets, "recv_offsets", world)
        _check_size(send, _extent(scounts, soffsets), "send")
        recv = self._recv(recv, send, (_extent(rcounts, roffsets),))
        _c.hb_alltoallv(self._handle, send, scounts, soffsets, recv, rcounts, roffsets, dt)
        return recv

    def broadcast(self, send, recv=None, root=0, dtype=None):
        """root's send lands in recv everywhere; recv=None: in place in send."""
        if recv is None:
            recv = _array(send, "send", writable=True)
        else:
            recv = _array(recv, "recv", writable=True)
            if send is not None:
                send = _array(send, "send", recv.dtype)
                _check_size(send, recv.size, "send")
        dt = _hb_dtype(recv, dtype, "recv")
        _c.hb_broadcast(self._handle, send, recv, recv.size, dt, root)
        return recv

    def reduce_scatter(self, send, recv=None, op=None, dtype=None):
        send = _array(send, "send")
        dt = _hb_dtype(send, dtype, "send")
        world = self.world_size
        if send.size % world:
            raise ValueError("send: %d elements do not split into %d equal blocks" % (send.size, world))
        recv = self._recv(recv, send, (send.size // world,))
        _c.hb_reduce_scatter(self._handle, send, recv, send.size // world, dt,
                             SUM if op is None else op)  # noqa: F821
        return recv

    def allreduce_many(self, arrays, op=None, dtype=None):
        """Reduce every array in place, fused into buckets."""
        arrays = [_array(a, "arrays[%d]" % i, writable=True) for i, a in enumerate(arrays)]
        if not arrays:
            return arrays
        dt = _hb_dtype(arrays[0], dtype, "arrays[0]")
        for i, a in enumerate(arrays[1:], 1):
            if a.dtype != arrays[0].dtype:
                raise TypeError("arrays[%d]: dtype %s differs from arrays[0]'s %s" % (i, a.dtype, arrays[0].dtype))
        _c.hb_allreduce_many(self._handle, arrays, dt, SUM if op is None else op)  # noqa: F821
        return arrays


class Embedding(_Handle):
    """A table sharded over a context's ranks (hb_embedding), or a read-only
    serving table from :meth:`open`. Rows are float32.

    config: any field of hb_embedding_config (num_rows, partition,
    initializer, init_a, init_b, seed, optimizer, learning_rate, ...).
    """

    _destroy = staticmethod(_c.hb_embedding_destroy)

    def __init__(self, ctx, name, dim, **config):
        cfg = _fill(_c.hb_embedding_config(), dict(config, name=name, dim=dim), "embedding config")
        super().__init__(_c.hb_embedding_create(ctx._handle, cfg))
        self._ctx = ctx
        ctx._children.add(self)

    @classmethod
    def open(cls, path):
        """A serving table from an hb_embedding_export file (no context)."""
        self = cls.__new__(cls)
        _Handle.__init__(self, _c.hb_embedding_open(path))
        self._ctx = None
        return self

    dim = property(lambda self: _c.hb_embedding_dim(self._handle))
    local_rows = property(lambda self: _c.hb_embedding_local_rows(self._handle))
    misses = property(lambda self: _c.hb_embedding_misses(self._handle))

    def lookup(self, ids, out=None):
        """Rows of ids (an int64 array) as an (n, dim) float32 array."""
        ids = _array(ids, "ids", np.int64)
        shape = (ids.size, self.dim)
        if out is None:
            out = np.empty(shape, dtype=np.float32)
        else:
            out = _array(out, "out", np.float32, writable=True)
            if out.size != ids.size * shape[1]:
                raise ValueError("out: needs %d x %d elements, the array has %d" % (shape + (out.size,)))
        _c.hb_embedding_lookup(self._handle, ids, ids.size, out)
        return out

    def apply_gradients(self, ids, grads):
        """One optimizer step for each row in ids; grads is n x dim float32."""
        ids = _array(ids, "ids", np.int64)
        grads = _array(grads, "grads", np.float32)
        if grads.size != ids.size * self.dim:
            raise ValueError("grads: needs %d x %d elements, the array has %d"
                             % (ids.size, self.dim, grads.size))
        _c.hb_embedding_apply_gradients(self._handle, ids, ids.size, grads)

    def save(self, directory):
        _c.hb_embedding_save(self._handle, str(directory))

    def load(self, directory):
        _c.hb_embedding_load(self._handle, str(directory))

    def export(self, path):
        _c.hb_embedding_export(self._handle, str(path))


class Metric(_Handle):
    """A streaming metric (hb_metric); ctx=None makes a local one.

    config: any field of hb_metric_config (num_thresholds, curve, summation,
    gauc_weighting, threshold, bins).
    """

    _destroy = staticmethod(_c.hb_metric_destroy)

    def __init__(self, kind=None, ctx=None, **config):
        if kind is not None:
            config["kind"] = kind
        cfg = _fill(_c.hb_metric_config(), config, "metric config")
        super().__init__(_c.hb_metric_create(None if ctx is None else ctx._handle, cfg))
        self._ctx = ctx
        if ctx is not None:
            ctx._children.add(self)

    def update(self, labels, preds, weights=None, groups=None):
        """Add samples: float32 labels, preds and optional weights; int64 groups (GAUC)."""
        labels = _array(labels, "labels", np.float32)
        preds = _array(preds, "preds", np.float32)
        n = labels.size
        if preds.size != n:
            raise ValueError("preds: %d elements, labels has %d" % (preds.size, n))
        if weights is not None:
            weights = _array(weights, "weights", np.float32)
            if weights.size != n:
                raise ValueError("weights: %d elements, labels has %d" % (weights.size, n))
        if groups is None:
            _c.hb_metric_update(self._handle, labels, preds, weights, n)
            return
        groups = _array(groups, "groups", np.int64)
        if groups.size != n:
            raise ValueError("groups: %d elements, labels has %d" % (groups.size, n))
        _c.hb_metric_update_grouped(self._handle, labels, preds, weights, groups, n)

    def result(self):
        """The metric over every sample so far (collective with a context)."""
        return _c.hb_metric_result(self._handle)

    flags = property(lambda self: _c.hb_metric_flags(self._handle))

    def reset(self):
        _c.hb_metric_reset(self._handle)


# ---- Reader (EXPERIMENTAL: hb/reader.py) --------------------------------------
from .reader import Batch, Reader  # noqa: E402,F401
