"""hb: hybrid data-parallel and embedding-sharded training (Python binding).

A thin layer over the SWIG module ``hb.capi`` (one call per function of
hb.h). Buffers are numpy arrays: a C-contiguous array of the right dtype is
passed to C without a copy. Anything else is refused with an
:class:`HbTypeError` (wrong type or dtype) or :class:`HbValueError` (wrong
layout or size) that names the parameter and what to pass -- unless the
call is given ``convert=True``, the explicit opt-in that converts inputs
(lists, float64 arrays, strided views, CPU torch tensors) with
``np.ascontiguousarray(x, dtype)`` first, at the cost of a copy. Outputs
(``recv``, ``out``, ``allreduce_many``'s arrays) are never converted: they
are written in place. Results come back as numpy arrays.

CUDA arrays (``__cuda_array_interface__``: CuPy, torch CUDA tensors, Numba)
are passed by device pointer to the calls whose C side takes device memory
(the collectives, GPU tables: ``Embedding(..., device="cuda")``), on the
context's CUDA stream (:meth:`Context.set_cuda_stream`); calls that take
host memory only refuse them with :class:`HbDeviceError`.

Errors: every refusal of hb's own is an :class:`HbError` (``except
hb.HbError`` catches all of them): a failing libhb call carries its status
and hb_last_error(); an argument refused here is an :class:`HbTypeError` /
:class:`HbValueError` (status ``ERR_INVALID_ARGUMENT``) that is also a
``TypeError`` / ``ValueError``. Handles (:class:`Context`,
:class:`Embedding`, :class:`Collection`,
:class:`Metric`) are context managers.

PyTorch: ``import hb.torch`` (only then is torch imported) for an embedding
module with autograd, data-parallel gradients and checkpoints.

Constants are hb.h's without the ``HB_`` prefix: ``hb.FLOAT32``, ``hb.SUM``,
``hb.ERR_TIMEOUT``, ``hb.OPT_ADAGRAD``, ``hb.METRIC_AUC`` ...

Parameter servers (EXPERIMENTAL, docs/parameter-servers.md): a ps task
calls :meth:`Context.serve`; workers create tables with
``placement=hb.PLACEMENT_PS`` and dense buffers (:class:`PsDense`) on the ps
tasks, and mark reader positions with :meth:`Context.ps_set_position`.
"""

import collections
import functools
import math
import weakref

import numpy as np

from . import capi as _c
from ._device import DeviceArray as _DeviceArray, device_array as _device_array, \
    is_device_array as _is_device_array
from ._errors import HbArgumentError, HbDeviceError, HbError, HbTypeError, HbValueError  # noqa: F401 (public)

for _name in dir(_c):
    if _name.startswith("HB_") and isinstance(getattr(_c, _name), int):
        globals()[_name[3:]] = getattr(_c, _name)
del _name


def _refusing_as_hb_errors(fn):
    """fn, with SWIG's own argument refusals (a str where an int is needed,
    a negative size) raised as HbTypeError / HbValueError."""
    @functools.wraps(fn)
    def call(*args):
        try:
            return fn(*args)
        except HbError:
            raise
        except (TypeError, OverflowError) as e:
            raise HbTypeError("%s: %s" % (fn.__name__, e)) from None
        except ValueError as e:
            raise HbValueError("%s: %s" % (fn.__name__, e)) from None
    return call


for _name, _fn in list(vars(_c).items()):
    if _name.startswith("hb_") and callable(_fn) and not isinstance(_fn, type) \
            and not getattr(_fn, "_hb_wrapped", False):
        _fn = _refusing_as_hb_errors(_fn)
        _fn._hb_wrapped = True
        setattr(_c, _name, _fn)
del _name, _fn

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
_NP_DTYPE = {v: k for k, v in _HB_DTYPE.items()}


# ---- Argument checks ---------------------------------------------------------

def _array(x, param, dtype=None, writable=False, convert=False, device=False):
    """x itself when it can be handed to C without a copy; with convert (and
    not writable) a C-contiguous copy of dtype; raises otherwise. A CUDA
    array (__cuda_array_interface__) is a checked _DeviceArray when device
    is True (never converted: that would copy), an HbDeviceError otherwise."""
    if _is_device_array(x):
        if not device:
            raise HbDeviceError("%s: a CUDA array (%s), but this call takes host memory only; pass a "
                                "numpy array (copy it to the host yourself: x.get() / x.cpu().numpy())"
                                % (param, type(x).__name__))
        return _device_array(x, param, dtype, writable)
    if convert and not writable:
        try:
            x = np.ascontiguousarray(x, dtype=dtype)
        except (TypeError, ValueError) as e:
            raise HbTypeError("%s: cannot convert %s to a numpy array%s: %s"
                              % (param, type(x).__name__,
                                 "" if dtype is None else " of " + str(np.dtype(dtype)), e)) from None
    if not isinstance(x, np.ndarray):
        want = "" if dtype is None else " of dtype " + str(np.dtype(dtype))
        raise HbTypeError("%s: expected a numpy array, got %s (pass a C-contiguous numpy array%s, "
                          "or convert=True to convert)" % (param, type(x).__name__, want))
    if dtype is not None and x.dtype != np.dtype(dtype):
        raise HbTypeError("%s: expected dtype %s, got %s (pass x.astype(np.%s), or convert=True to "
                          "convert)" % (param, np.dtype(dtype), x.dtype, np.dtype(dtype)))
    if not x.flags.c_contiguous:
        raise HbValueError("%s: the array is not C-contiguous (pass np.ascontiguousarray(x), or "
                           "convert=True to copy)" % param)
    if writable and not x.flags.writeable:
        raise HbValueError("%s: the array is read-only" % param)
    return x


def _hb_dtype(arr, dtype, param):
    """The hb dtype of arr: inferred from its numpy dtype, or checked."""
    if dtype is None:
        try:
            return _HB_DTYPE[arr.dtype]
        except KeyError:
            raise HbTypeError(
                "%s: numpy dtype %s has no hb dtype (float32, float64, float16, int32, "
                "int64, uint8; bfloat16 as uint16 with dtype=hb.BFLOAT16)" % (param, arr.dtype)
            ) from None
    size = _c.hb_dtype_size(dtype)
    if size == 0:
        raise HbValueError("%s: unknown hb dtype %r" % (param, dtype))
    if arr.dtype.itemsize != size or arr.dtype.kind not in "fiu":
        raise HbTypeError("%s: numpy dtype %s does not hold hb dtype %d" % (param, arr.dtype, dtype))
    return dtype


def _counts(x, param, n):
    """n 64-bit counts or offsets (a list or an int64 array), or None."""
    if x is None:
        return None
    try:
        a = np.ascontiguousarray(x, dtype=np.int64)
    except (TypeError, ValueError) as e:
        raise HbTypeError("%s: expected %d integers, got %r: %s" % (param, n, x, e)) from None
    if a.ndim != 1 or a.size != n:
        raise HbValueError("%s: expected %d entries (one per rank), got shape %s" % (param, n, a.shape))
    return a


def _extent(counts, offsets):
    """Elements a counts/offsets layout spans."""
    if offsets is None:
        return int(counts.sum())
    return int(max((o + c for o, c in zip(offsets, counts)), default=0))


def _check_size(arr, want, param):
    if arr.size < want:
        raise HbValueError("%s: needs %d elements, the array has %d" % (param, want, arr.size))


def _same_memory(a, b, param_a, param_b):
    """Refuses a mix of host and CUDA arrays in one call."""
    if isinstance(a, _DeviceArray) != isinstance(b, _DeviceArray):
        raise HbDeviceError("%s is %s but %s is %s: pass both in host memory or both on the device"
                            % (param_a, _kind(a), param_b, _kind(b)))


def _kind(a):
    return "a CUDA array" if isinstance(a, _DeviceArray) else "host memory"


def _user(a):
    """What a call hands back: the caller's own object for a CUDA array."""
    return a.obj if isinstance(a, _DeviceArray) else a


def _memory(arr, param, device, what):
    """arr, or an HbDeviceError when its memory (host / CUDA) is not that of
    the table or collection (what) living on device (-1: the host)."""
    if isinstance(arr, _DeviceArray) != (device >= 0):
        raise HbDeviceError(
            "%s: %s, but this is a %s %s: pass %s" % (
                param, _kind(arr), "GPU (cuda:%d)" % device if device >= 0 else "host", what,
                "a CUDA array on that device" if device >= 0 else
                "a numpy array (or create the tables with device='cuda')"))
    return arr


def _device_index(device, ctx):
    """hb_embedding_config.device for device=: None / "cpu" / -1: host;
    "cuda": the context's CUDA device; "cuda:N" / N: device N."""
    if device is None or device == "cpu" or device == -1:
        return -1
    if isinstance(device, int) and not isinstance(device, bool) and device >= 0:
        return device
    if isinstance(device, str) and device.startswith("cuda"):
        spec = device[4:]
        if spec == "":
            where = ctx.device
            if not where.startswith("cuda:"):
                raise HbValueError("device: 'cuda', but the context's device is %r (this process sees "
                                   "%d CUDA devices): pass device='cuda:N'" % (where, ctx.num_gpus))
            return int(where[5:])
        if spec.startswith(":") and spec[1:].isdigit():
            return int(spec[1:])
    raise HbValueError("device: %r; pass 'cpu', 'cuda', 'cuda:N' or N >= 0" % (device,))


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
        raise HbValueError("num_subnetworks: must be >= 0, got %d" % num_subnetworks)
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
            raise HbValueError("%s is closed" % type(self).__name__)
        return self._h

    @property
    def closed(self):
        """True once close() ran."""
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
            raise HbTypeError("unknown %s field %r (known: %s)" % (
                what, key, ", ".join(k for k in dir(struct) if not k.startswith("_")
                                     and k not in ("struct_size", "this", "thisown"))))
        try:
            setattr(struct, key, value)
        except (TypeError, ValueError, OverflowError) as e:
            raise HbTypeError("%s field %r: %r does not fit its type (%s)" % (what, key, value, e)) from None
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
    Use a context from one thread at a time (abort() from any thread).

    Collectives are called in the same order on every rank. ``recv=None``
    allocates the result; pass ``recv=send`` to work in place. ``dtype``
    (an hb dtype) defaults to the one of send's numpy dtype (bfloat16: pass
    uint16 arrays with ``dtype=hb.BFLOAT16``). ``convert=True`` converts a
    send that is not a C-contiguous numpy array (a list, a strided view, a
    CPU torch tensor) with a copy instead of refusing it.

    CUDA arrays (anything with ``__cuda_array_interface__``: CuPy, torch
    CUDA tensors, Numba) are passed by device pointer, without a copy, and
    reduced through NCCL: C-contiguous, send and recv both on the device
    (pass ``recv``: hb allocates no device memory). The work is enqueued on
    the context's CUDA stream: point it at the stream that produced the
    data with :meth:`set_cuda_stream` (CuPy:
    ``cupy.cuda.get_current_stream().ptr``, torch:
    ``torch.cuda.current_stream().cuda_stream``) and read the result in
    that stream, or after :meth:`synchronize`.
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
        self._cuda_stream = None  # the last set_cuda_stream (hb.torch skips repeats)

    def close(self):
        """Close the embeddings and metrics made on this context, then it."""
        for child in list(self._children):
            child.close()
        super().close()

    # Accessors.
    rank = property(lambda self: _c.hb_context_rank(self._handle), doc="This rank, 0..world_size-1.")
    world_size = property(lambda self: _c.hb_context_world_size(self._handle), doc="Number of ranks.")
    local_rank = property(lambda self: _c.hb_context_local_rank(self._handle),
                          doc="This rank's index among the ranks of its machine.")
    local_world_size = property(lambda self: _c.hb_context_local_world_size(self._handle),
                                doc="Number of ranks on this machine.")
    is_chief = property(lambda self: bool(_c.hb_context_is_chief(self._handle)),
                        doc="True on rank 0 (TF_CONFIG's chief).")
    task_type = property(lambda self: _c.hb_context_task_type(self._handle),
                         doc='TF_CONFIG role: "chief", "worker", "ps", "evaluator".')
    task_id = property(lambda self: _c.hb_context_task_id(self._handle), doc="Index within the role.")
    num_gpus = property(lambda self: _c.hb_context_num_gpus(self._handle),
                        doc="CUDA devices visible to this process (0 without CUDA).")
    device = property(lambda self: _c.hb_context_device(self._handle),
                      doc='The device this rank uses: "cpu:0" or "cuda:N".')

    num_ps = property(lambda self: _c.hb_context_num_ps(self._handle),
                      doc="Number of ps tasks of the job (0: collective mode).")

    # ---- Parameter servers (EXPERIMENTAL: docs/parameter-servers.md) ----

    def serve(self):
        """On a ps task (``task_type == "ps"``): serve the workers' ps tables
        and dense buffers until every worker has left (hb_context_serve).
        Raises HbError ERR_PEER_FAILED when workers were lost and none came
        back, ERR_TIMEOUT when none came, ERR_INVALID_ARGUMENT on a worker."""
        _c.hb_context_serve(self._handle)

    def ps_set_position(self, position):
        """The reader position (bytes-like, at most 64 KiB) that this
        worker's next pushes carry; each ps task commits it with the push's
        gradients, atomically (hb_ps_set_position). Not copied here."""
        try:
            view = memoryview(position)
        except TypeError:
            raise HbTypeError("position: expected bytes (or any bytes-like object), got %s"
                              % type(position).__name__) from None
        if not view.c_contiguous:
            raise HbValueError("position: the buffer is not C-contiguous")
        _c.hb_ps_set_position(self._handle, position, view.nbytes)

    def ps_position(self, step=False):
        """After a restart (and after creating the ps tables): the position
        this worker committed with its last step applied everywhere, as
        bytes, or None when it committed nothing (hb_ps_position). The
        tables resume at that step. step=True: ``(position, step)``."""
        blob, n = _c.hb_ps_position(self._handle)
        blob = blob if n > 0 else None
        return (blob, n) if step else blob

    def ps_stats(self):
        """The ps tasks' counters (hb_ps_stats, summed; max_staleness the
        largest) as a dict: pulls, pushes, rows_pulled, rows_pushed, rounds,
        max_staleness, bound_violations, duplicate_pushes, workers_lost,
        workers_rejoined, busy_us, workers_left, workers_gone."""
        v = np.zeros(len(_PS_STATS), np.int64)
        _c.hb_ps_get_stats(self._handle, v)
        return dict(zip(_PS_STATS, v.tolist()))

    def get_option(self, name):
        """Current value of an option, as a string."""
        return _c.hb_context_get_option(self._handle, name)

    def set_option(self, name, value):
        """Set an option (type-checked: HbError ERR_CONFIG names both)."""
        _c.hb_context_set_option(self._handle, name, _option_value(value))

    def barrier(self, timeout_ms=0):
        """Wait until every rank arrives (collective); 0: the context timeout."""
        _c.hb_context_barrier(self._handle, timeout_ms)

    def abort(self, reason):
        """Every rank's pending and later calls fail with ERR_ABORTED."""
        _c.hb_context_abort(self._handle, reason)

    def set_cuda_stream(self, stream):
        """Enqueue hb's GPU work on this cudaStream_t (an integer: torch's
        ``stream.cuda_stream``, CuPy's ``stream.ptr``); None: the context's
        own stream. 0, the legacy default stream's handle in torch and CuPy,
        is passed as cudaStreamLegacy (0x1), which names that stream (a NULL
        handle would mean the context's own). Switching streams first waits
        for hb's work on the old one."""
        _c.hb_context_set_cuda_stream(self._handle, None if stream is None else int(stream) or 1)
        self._cuda_stream = stream

    def synchronize(self):
        """Wait for the GPU work enqueued on the context's stream."""
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

    def _cuda(self, arr, param):
        """arr; a CUDA array only when hb sees a CUDA device (libhb would
        otherwise take its pointer for host memory)."""
        if isinstance(arr, _DeviceArray) and self.num_gpus <= 0:
            raise HbError(ERR_UNSUPPORTED, "HB_ERR_UNSUPPORTED",  # noqa: F821
                          "%s: a CUDA array, but hb sees no CUDA device (%s); pass a numpy array"
                          % (param, build_info()))
        return arr

    def _recv(self, recv, send, shape, param="recv"):
        if recv is None:
            if isinstance(send, _DeviceArray):
                raise HbValueError("%s: send is a CUDA array and hb does not allocate device memory: "
                                   "pass %s (a CUDA array of %d elements), or %s=send to work in place"
                                   % (param, param, math.prod(shape), param))
            return np.empty(shape, dtype=send.dtype)
        recv = _array(recv, param, send.dtype, writable=True, device=True)
        _same_memory(send, recv, "send", param)
        _check_size(recv, math.prod(shape), param)
        return self._cuda(recv, param)  # last: every other refusal first

    def _send(self, send, dtype, convert, param="send"):
        """(array, hb dtype) of a send argument (a CUDA array: as it is)."""
        want = _NP_DTYPE.get(dtype) if convert and dtype is not None else None
        send = _array(send, param, want, convert=convert, device=True)
        return send, _hb_dtype(send, dtype, param)

    def allreduce(self, send, recv=None, op=None, dtype=None, convert=False):
        """Element-wise reduction (op: hb.SUM by default, PROD, MIN, MAX, AVG)
        of every rank's send; returns recv (same shape as send)."""
        send, dt = self._send(send, dtype, convert)
        recv = self._recv(recv, send, send.shape)
        _c.hb_allreduce(self._handle, send, recv, send.size, dt, SUM if op is None else op)  # noqa: F821
        return _user(recv)

    def allgather(self, send, recv=None, dtype=None, convert=False):
        """Every rank's send, stacked: shape (world_size,) + send.shape."""
        send, dt = self._send(send, dtype, convert)
        recv = self._recv(recv, send, (self.world_size,) + send.shape)
        _c.hb_allgather(self._handle, send, recv, send.size, dt)
        return _user(recv)

    def allgatherv(self, send, recv_counts, recv=None, recv_offsets=None, dtype=None, convert=False):
        """Every rank's send (of recv_counts[r] elements), packed in rank
        order or at recv_offsets; a flat array."""
        send, dt = self._send(send, dtype, convert)
        world = self.world_size
        counts = _counts(recv_counts, "recv_counts", world)
        offsets = _counts(recv_offsets, "recv_offsets", world)
        recv = self._recv(recv, send, (_extent(counts, offsets),))
        _c.hb_allgatherv(self._handle, send, send.size, recv, counts, offsets, dt)
        return _user(recv)

    def alltoall(self, send, recv=None, dtype=None, convert=False):
        """send is world_size equal blocks; block p goes to rank p. recv
        holds block r from each rank r, in rank order (send's shape)."""
        send, dt = self._send(send, dtype, convert)
        world = self.world_size
        if send.size % world:
            raise HbValueError("send: %d elements do not split into %d equal blocks" % (send.size, world))
        recv = self._recv(recv, send, send.shape)
        _c.hb_alltoall(self._handle, send, recv, send.size // world, dt)
        return _user(recv)

    def alltoallv(self, send, send_counts, recv_counts, recv=None, send_offsets=None,
                  recv_offsets=None, dtype=None, convert=False):
        """Per-peer counts (and optional offsets, elements): send_counts[p]
        here must equal recv_counts[me] on rank p. A flat array."""
        send, dt = self._send(send, dtype, convert)
        world = self.world_size
        scounts = _counts(send_counts, "send_counts", world)
        soffsets = _counts(send_offsets, "send_offsets", world)
        rcounts = _counts(recv_counts, "recv_counts", world)
        roffsets = _counts(recv_offsets, "recv_offsets", world)
        _check_size(send, _extent(scounts, soffsets), "send")
        recv = self._recv(recv, send, (_extent(rcounts, roffsets),))
        _c.hb_alltoallv(self._handle, send, scounts, soffsets, recv, rcounts, roffsets, dt)
        return _user(recv)

    def broadcast(self, send, recv=None, root=0, dtype=None, convert=False):
        """root's send lands in recv everywhere; recv=None: in place in send
        (which then must be a writable array on every rank)."""
        if recv is None:
            send = recv = self._cuda(_array(send, "send", writable=True, device=True), "send")
        else:
            recv = _array(recv, "recv", writable=True, device=True)
            if send is not None:
                send = _array(send, "send", recv.dtype, convert=convert, device=True)
                _same_memory(send, recv, "send", "recv")
                _check_size(send, recv.size, "send")
            self._cuda(recv, "recv")
        dt = _hb_dtype(recv, dtype, "recv")
        _c.hb_broadcast(self._handle, send, recv, recv.size, dt, root)
        return _user(recv)

    def reduce_scatter(self, send, recv=None, op=None, dtype=None, convert=False):
        """send is world_size equal blocks; rank r gets the reduction of
        every rank's block r."""
        send, dt = self._send(send, dtype, convert)
        world = self.world_size
        if send.size % world:
            raise HbValueError("send: %d elements do not split into %d equal blocks" % (send.size, world))
        recv = self._recv(recv, send, (send.size // world,))
        _c.hb_reduce_scatter(self._handle, send, recv, send.size // world, dt,
                             SUM if op is None else op)  # noqa: F821
        return _user(recv)

    def allreduce_many(self, arrays, op=None, dtype=None):
        """Reduce every array in place, fused into buckets (grad_nbuckets /
        grad_bucket_bytes); the result equals one allreduce per array. The
        arrays share one dtype and must be writable and C-contiguous."""
        arrays = [_array(a, "arrays[%d]" % i, writable=True, device=True) for i, a in enumerate(arrays)]
        if not arrays:
            return arrays
        for i, a in enumerate(arrays[1:], 1):
            _same_memory(arrays[0], a, "arrays[0]", "arrays[%d]" % i)
        dt = _hb_dtype(arrays[0], dtype, "arrays[0]")
        for i, a in enumerate(arrays[1:], 1):
            if a.dtype != arrays[0].dtype:
                raise HbTypeError("arrays[%d]: dtype %s differs from arrays[0]'s %s (one call per dtype)"
                                  % (i, a.dtype, arrays[0].dtype))
        self._cuda(arrays[0], "arrays")
        _c.hb_allreduce_many(self._handle, arrays, dt, SUM if op is None else op)  # noqa: F821
        return [_user(a) for a in arrays]


# hb_ps_stats, as the binding's flat call returns it.
_PS_STATS = ("pulls", "pushes", "rows_pulled", "rows_pushed", "rounds", "max_staleness",
             "bound_violations", "duplicate_pushes", "workers_lost", "workers_rejoined",
             "busy_us", "workers_left", "workers_gone")

# hb_embedding_lifecycle_stats, as the binding's flat call returns it.
_LIFECYCLE_STATS = ("step", "rows", "pending", "admitted", "dropped", "evicted_ttl",
                    "evicted_l2", "evicted_capacity", "boundaries", "selection_rounds",
                    "boundary_us", "memory_bytes")


class Embedding(_Handle):
    """A table sharded over a context's ranks (hb_embedding), or a read-only
    serving table from :meth:`open`. Rows are float32.

    config: any field of hb_embedding_config (num_rows, partition,
    initializer, init_a, init_b, seed, optimizer, learning_rate, ...).

    placement (a config field): ``hb.PLACEMENT_WORKERS`` (default: sharded
    over the ranks) or ``hb.PLACEMENT_PS``: the rows live on the job's ps
    tasks (``ctx.num_ps > 0``), and lookups and updates are not collective
    (each worker at its own pace; docs/parameter-servers.md).

    lifecycle: None, or a dict of hb_embedding_lifecycle fields (admission,
    min_count, bloom_bytes, bloom_fpr, default_value, evict_interval,
    ttl_steps, ttl_seconds, max_rows, score, min_l2_norm; EXPERIMENTAL,
    docs/table-lifecycle.md) for a dynamic host table: admission and
    eviction; see :meth:`lifecycle_stats`.
    Collective to create; lookup, apply_gradients, save, load and export
    are collective too (ranks may pass different numbers of ids, even 0).

    device: "cpu" (default), "cuda" (the context's CUDA device), "cuda:N"
    or N: a GPU table, whose rows live on that device (the context's). Its
    ids, out and grads are then CUDA arrays (``__cuda_array_interface__``,
    C-contiguous; ``out`` must be passed), the work is enqueued on the
    context's CUDA stream (see :meth:`Context.set_cuda_stream`), and results
    and checkpoints equal a host table's. A host table takes numpy arrays.
    """

    _destroy = staticmethod(_c.hb_embedding_destroy)

    def __init__(self, ctx, name, dim, device=None, lifecycle=None, **config):
        config["device"] = _device_index(device, ctx)
        cfg = _fill(_c.hb_embedding_config(), dict(config, name=name, dim=dim), "embedding config")
        if lifecycle is not None:
            cfg.use_lifecycle(_fill(_c.hb_embedding_lifecycle(), dict(lifecycle), "lifecycle"))
        super().__init__(_c.hb_embedding_create(ctx._handle, cfg))
        self._ctx = ctx
        self._dim = _c.hb_embedding_dim(self._handle)  # fixed: no call per lookup
        self.device = cfg.device
        ctx._children.add(self)

    @classmethod
    def open(cls, path):
        """A serving table from an export file (hb_embedding_export, or a full
        version of export_version) with no context; lookups are thread-safe
        and :meth:`update` follows newer versions while they run."""
        self = cls.__new__(cls)
        _Handle.__init__(self, _c.hb_embedding_open(str(path)))
        self._ctx = None
        self._dim = _c.hb_embedding_dim(self._handle)
        self.device = -1
        return self

    dim = property(lambda self: self._dim, doc="Row width.")
    local_rows = property(lambda self: _c.hb_embedding_local_rows(self._handle),
                          doc="Rows held by this rank (the whole table when serving).")
    misses = property(lambda self: _c.hb_embedding_misses(self._handle),
                      doc="Serving tables: ids looked up that were not in the file.")

    def lifecycle_stats(self):
        """This rank's admission and eviction counters
        (hb_embedding_lifecycle_stats) as a dict; a table created with
        lifecycle= only."""
        v = np.zeros(len(_LIFECYCLE_STATS), np.int64)
        _c.hb_embedding_lifecycle_get_stats(self._handle, v)
        st = dict(zip(_LIFECYCLE_STATS, v.tolist()))
        st["boundary_seconds"] = st.pop("boundary_us") / 1e6
        return st

    def _memory(self, arr, param):
        return _memory(arr, param, self.device, "table")

    def lookup(self, ids, out=None, convert=False):
        """Rows of ids (an int64 array) as an (n, dim) float32 array.
        convert=True: ids may be any integer sequence (copied to int64).
        GPU table: ids and out are CUDA arrays (out is required)."""
        return self.lookup_version(ids, out, convert)[0]

    def lookup_version(self, ids, out=None, convert=False):
        """As :meth:`lookup`, and the version the rows came from:
        ``(rows, version)``. A serving table reads exactly one version per
        call; a sharded table or an unversioned export reports 0."""
        ids = self._memory(_array(ids, "ids", np.int64, convert=convert, device=True), "ids")
        shape = (ids.size, self._dim)
        if out is None:
            if self.device >= 0:
                raise HbValueError("out: a GPU table writes into a CUDA array you pass (%d x %d float32); "
                                   "hb allocates no device memory" % shape)
            out = np.empty(shape, dtype=np.float32)
        else:
            out = self._memory(_array(out, "out", np.float32, writable=True, device=True), "out")
            if out.size != ids.size * shape[1]:
                raise HbValueError("out: needs %d x %d elements, the array has %d" % (shape + (out.size,)))
        version = _c.hb_embedding_lookup_version(self._handle, ids, ids.size, out)
        return _user(out), version

    def apply_gradients(self, ids, grads, convert=False):
        """One optimizer step for each row in ids; grads is n x dim float32
        (gradients of duplicate ids are summed). convert=True: ids and grads
        are converted to int64 / float32 C-contiguous copies if needed.
        GPU table: both are CUDA arrays."""
        ids = self._memory(_array(ids, "ids", np.int64, convert=convert, device=True), "ids")
        grads = self._memory(_array(grads, "grads", np.float32, convert=convert, device=True), "grads")
        if grads.size != ids.size * self._dim:
            raise HbValueError("grads: needs %d x %d elements, the array has %d"
                               % (ids.size, self.dim, grads.size))
        _c.hb_embedding_apply_gradients(self._handle, ids, ids.size, grads)

    def save(self, directory):
        """Checkpoint rows and optimizer slots into directory (collective, atomic)."""
        _c.hb_embedding_save(self._handle, str(directory))

    def load(self, directory):
        """Load a checkpoint, re-sharding if saved at another world size (collective)."""
        _c.hb_embedding_load(self._handle, str(directory))

    def export(self, path):
        """Write one serving file that Embedding.open reads (collective)."""
        _c.hb_embedding_export(self._handle, str(path))

    def export_version(self, path, version, base=0):
        """Write version ``version`` (larger than every earlier one) to path
        (collective): in full (base 0) or as a delta since this table's
        export of version ``base``."""
        _c.hb_embedding_export_version(self._handle, str(path), version, base)

    def update(self, path):
        """Serving tables: apply the delta or open the newer full export at
        path while other threads keep looking up. A damaged or out-of-order
        file raises and the served version stays."""
        _c.hb_embedding_update(self._handle, str(path))

    version = property(lambda self: _c.hb_embedding_version(self._handle),
                       doc="Serving tables: the version served now (0: unversioned).")


class PsDense(_Handle):
    """A dense float32 buffer of ``count`` elements on the ps tasks
    (hb_ps_dense, tensorpack's parameter_server layout): :meth:`pull` before
    the step, :meth:`push` the gradient after; the ps tasks apply the
    buffer's optimizer element-wise, with the tables' staleness and rounds.
    Every worker creates it with the same config; ``init`` (count float32,
    None: zeros) is taken from the worker that creates it first.

    config: any field of hb_ps_dense_config (optimizer, learning_rate,
    initial_accumulator, beta1, beta2, epsilon, l1, l2, lr_power).
    """

    _destroy = staticmethod(_c.hb_ps_dense_destroy)

    def __init__(self, ctx, name, count, init=None, convert=False, **config):
        if init is not None:
            init = _array(init, "init", np.float32, convert=convert)
            if init.size != count:
                raise HbValueError("init: needs %d elements, the array has %d" % (count, init.size))
        cfg = _fill(_c.hb_ps_dense_config(), dict(config, name=name, count=count), "ps dense config")
        super().__init__(_c.hb_ps_dense_create(ctx._handle, cfg, init))
        self._ctx = ctx
        self.count = int(count)
        ctx._children.add(self)

    def pull(self, out=None):
        """The buffer as of this worker's step: a (count,) float32 array
        (``out``, written in place, when given)."""
        if out is None:
            out = np.empty(self.count, dtype=np.float32)
        else:
            out = _array(out, "out", np.float32, writable=True)
            if out.size != self.count:
                raise HbValueError("out: needs %d elements, the array has %d" % (self.count, out.size))
        _c.hb_ps_dense_pull(self._handle, out)
        return out

    def push(self, grads, convert=False):
        """One optimizer step with this gradient (count float32; summed
        over the workers of a round at staleness 0)."""
        grads = _array(grads, "grads", np.float32, convert=convert)
        if grads.size != self.count:
            raise HbValueError("grads: needs %d elements, the array has %d" % (self.count, grads.size))
        _c.hb_ps_dense_push(self._handle, grads)


class Collection(_Handle):
    """An embedding collection (hb_collection, EXPERIMENTAL in hb.h): the
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

    def lookup(self, values, offsets, weights=None, out=None, unpooled=None, host_offsets=None):
        """Collective. Returns the pooled (B, pooled_width) float32 matrix
        (``out`` when given); pooling-NONE rows go to ``unpooled`` (allocated
        when None on the host, and kept as ``self.last_unpooled``). GPU
        tables: CUDA arrays, ``out`` (and ``unpooled``) required."""
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
        _c.hbpy_collection_lookup(self._handle, b, values, offsets, weights, out, unpooled, starts)
        self.last_unpooled = None if unpooled is None else _user(unpooled)
        return _user(out)

    def apply_gradients(self, values, offsets, grad_out, weights=None, grad_unpooled=None, host_offsets=None):
        """Collective: grad_out is the gradient of the pooled output (B x
        pooled_width float32), grad_unpooled that of the unpooled rows. Reuses
        the last lookup's plan when every rank passes the same ids. GPU
        tables: CUDA arrays."""
        values, offsets, weights, b, host_offsets = self._batch(values, offsets, weights, host_offsets)
        grad_out = self._arg(grad_out, "grad_out", np.float32)
        if grad_out.size != b * self.pooled_width:
            raise HbValueError("grad_out: needs %d x %d elements, the array has %d"
                               % (b, self.pooled_width, grad_out.size))
        grad_unpooled, starts = self._rows(grad_unpooled, host_offsets, "grad_unpooled", False)
        _c.hbpy_collection_apply_gradients(self._handle, b, values, offsets, weights, grad_out,
                                           grad_unpooled, starts)

    _STATS = ("lookups", "updates", "reused_plans", "rounds", "ids", "unique_ids",
              "owner_unique", "wire_bytes_sent", "wire_bytes_recv", "dedup_bound_bytes")

    def stats(self):
        """This rank's counters (hb_collection_stats) as a dict."""
        a = np.zeros(len(self._STATS), dtype=np.uint64)
        _c.hb_collection_get_stats(self._handle, a)
        return {k: int(v) for k, v in zip(self._STATS, a)}


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

    def update(self, labels, preds, weights=None, groups=None, convert=False):
        """Add samples: float32 labels, preds and optional weights; int64 groups (GAUC).
        convert=True: any array-like (float64, lists, CPU tensors) is copied
        to the right dtype first."""
        labels = _array(labels, "labels", np.float32, convert=convert)
        preds = _array(preds, "preds", np.float32, convert=convert)
        n = labels.size
        if preds.size != n:
            raise HbValueError("preds: %d elements, labels has %d" % (preds.size, n))
        if weights is not None:
            weights = _array(weights, "weights", np.float32, convert=convert)
            if weights.size != n:
                raise HbValueError("weights: %d elements, labels has %d" % (weights.size, n))
        if groups is None:
            _c.hb_metric_update(self._handle, labels, preds, weights, n)
            return
        groups = _array(groups, "groups", np.int64, convert=convert)
        if groups.size != n:
            raise HbValueError("groups: %d elements, labels has %d" % (groups.size, n))
        _c.hb_metric_update_grouped(self._handle, labels, preds, weights, groups, n)

    def result(self):
        """The metric over every sample so far (collective with a context)."""
        return _c.hb_metric_result(self._handle)

    flags = property(lambda self: _c.hb_metric_flags(self._handle),
                     doc="hb.METRIC_FLAG_* bits of the last result (e.g. EMPTY).")

    def reset(self):
        """Forget every sample (local; not collective)."""
        _c.hb_metric_reset(self._handle)


# ---- Reader (EXPERIMENTAL: hb/reader.py) --------------------------------------
from .reader import Batch, Reader  # noqa: E402,F401

# ---- Job checkpoints (EXPERIMENTAL: hb/checkpoint.py) --------------------------
from .checkpoint import Checkpoint  # noqa: E402,F401
from .evaluator import Evaluator  # noqa: E402,F401
