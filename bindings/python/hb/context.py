"""hb.Context: a group of ranks (hb_context) and its collectives."""

import collections
import math
import weakref

import numpy as np

from . import capi as _c
from ._arrays import _DeviceArray, _NP_DTYPE, _array, _check_size, _counts, _extent, _hb_dtype, \
    _same_memory, _user
from ._clib import ERR_TIMEOUT, ERR_UNSUPPORTED, SUM  # noqa: F401
from ._errors import HbError, HbTypeError, HbValueError
from ._handle import _Handle, _fill


# hb_ps_stats, as the binding's flat call returns it.
_PS_STATS = ("pulls", "pushes", "rows_pulled", "rows_pushed", "rounds", "max_staleness",
             "bound_violations", "duplicate_pushes", "workers_lost", "workers_rejoined",
             "busy_us", "workers_left", "workers_gone")


# hb_ps_split: a split of the job's input (hb_ps_split_next); split -1: none left.
PsSplit = collections.namedtuple("PsSplit", "split epoch begin end start replay_end")
# ps_split_try's split when no split can be handed out now (HB_PS_SPLIT_LATER).
PS_SPLIT_LATER = -2


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

    def ps_split_next(self):
        """Dynamic splits (option ps_split_samples on ps task 0): this
        worker's next split as ``PsSplit(split, epoch, begin, end, start)``
        -- samples (or reader bytes) [begin, end), to be read from
        ``start`` (begin, or where an earlier holder's pushes stopped) --
        or None when every split is handed out (hb_ps_split_next). When
        ``replay_end`` > ``start`` the first batch must end there (a lost
        holder's last batch, pushed again whole)."""
        v = np.zeros(6, np.int64)
        _c.hb_ps_split_next(self._handle, v)
        return PsSplit(*v.tolist()) if v[0] >= 0 else None

    def ps_split_try(self):
        """ps_split_next without waiting (hb_ps_split_try): a ``PsSplit``
        whose split is ``PS_SPLIT_LATER`` when other workers hold every
        split left (make an empty step and ask again: a loop with job
        checkpoints reaches every save); None when every split is
        finished."""
        v = np.zeros(6, np.int64)
        _c.hb_ps_split_try(self._handle, v)
        return None if v[0] == -1 else PsSplit(*v.tolist())

    def ps_split_commit(self, split, offset):
        """Before a step's pushes (in place of ps_set_position): the step
        consumes ``split`` up to ``offset`` (end finishes it). The position
        rides with the pushes; the queue hears of it at the next call
        (hb_ps_split_commit)."""
        _c.hb_ps_split_commit(self._handle, int(split), int(offset))

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
                          % (param, _c.hb_build_info()))
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

    def allreduce_start(self, send, recv=None, op=None, dtype=None, convert=False):
        """Starts allreduce(send, recv, op) on the context's progress thread
        (hb_allreduce_start) and returns an AllreduceRequest at once; its
        wait() returns recv, bit-identical to allreduce's. The request holds
        send and recv until then: do not modify send or read recv before.
        Started allreduces run in start order; any other call may run on the
        context meanwhile. Host (numpy) arrays only."""
        send, dt = self._send(send, dtype, convert)
        recv = self._recv(recv, send, send.shape)
        handle = _c.hb_allreduce_start(self._handle, send, recv, send.size, dt,  # noqa: F821
                                       SUM if op is None else op)
        return AllreduceRequest(handle, send, recv)

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


class AllreduceRequest:
    """An allreduce in flight (Context.allreduce_start). wait() once; a
    request dropped without a wait is waited for by its finalizer (the
    library writes into recv until then)."""

    def __init__(self, handle, send, recv):
        self._req, self._send, self._recv = handle, send, recv

    @property
    def done(self):
        """True once wait() has returned (or raised, other than a timeout)."""
        return self._req is None

    def wait(self):
        """recv, reduced; raises HbError (e.g. HB_ERR_PEER_FAILED). After
        HB_ERR_TIMEOUT the allreduce is still in flight: wait again."""
        if self._req is None:
            raise HbValueError("AllreduceRequest.wait: already waited for")
        try:
            _c.hb_allreduce_wait(self._req)
        except HbError as e:
            if e.status != ERR_TIMEOUT:  # else still in flight, kept
                self._release()
            raise
        recv = self._recv
        self._release()
        return _user(recv)

    def _release(self):
        self._req = self._send = self._recv = None

    def __del__(self):
        if getattr(self, "_req", None) is not None:
            try:
                self.wait()
            except Exception:  # noqa: BLE001 (a finalizer raises nothing)
                pass
