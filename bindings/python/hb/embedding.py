"""hb.Embedding (sharded, ps or serving tables, hb_embedding) and hb.PsDense
(dense buffers on the ps tasks, hb_ps_dense)."""

import numpy as np

from . import capi as _c
from ._arrays import _array, _device_index, _memory, _user
from ._errors import HbValueError
from ._handle import _Handle, _fill


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
