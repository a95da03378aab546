"""Job checkpoints (hb.h "Job checkpoints", EXPERIMENTAL; docs/fault-tolerance.md).

:class:`Checkpoint` saves every registered table, numpy (or CUDA) buffer,
reader position and metric of a job, consistent across ranks and atomic,
and restores them -- bit for bit at the same world size, re-sharded at
another. The buffers are the arrays themselves (no copy at registration):
the checkpoint keeps them alive and reads / writes them in place.
"""

import numpy as np

from . import capi as _c
from . import _Handle, _array, _fill, _is_device_array, _device_array
from ._errors import HbError, HbTypeError, HbValueError

_STATS = ("saves", "last_step", "committed_step", "pending", "skipped_damaged",
          "restored_step", "restored_world", "unmapped_buffers", "state_bytes",
          "file_bytes", "blocked_seconds", "write_seconds", "failed_saves")


def _buffer(array):
    """(bytes, HB_BUFFER_DEVICE or 0) of a writable numpy or CUDA array that
    a checkpoint (or an evaluator) reads and writes in place."""
    if _is_device_array(array):
        return int(_device_array(array, "array", None, True).nbytes), _c.HB_BUFFER_DEVICE
    if isinstance(array, np.ndarray):
        return int(_array(array, "array", None, writable=True).nbytes), 0
    raise HbTypeError("array: expected a numpy or CUDA array, got %s"
                      % type(array).__name__)


class Checkpoint(_Handle):
    """The job's checkpoints in directory ``dir`` (collective to create).

    dir: None takes the option checkpoint_dir (HB_CHECKPOINT_DIR). keep: the
    complete checkpoints kept. async_write: save() copies the state and a
    background thread writes it (wait() for the commit). job_id: a directory
    of another job is refused (None: option checkpoint_job_id).

    Register the same things in the same order on every rank, then call
    :meth:`restore_latest` once at start (the step to resume from, or -1)
    and :meth:`save` at step boundaries.
    """

    _destroy = staticmethod(_c.hb_checkpoint_destroy)

    def __init__(self, ctx, dir=None, keep=3, async_write=False, job_id=None, timeout_ms=0):
        fields = dict(keep=int(keep), async_write=int(bool(async_write)),
                      timeout_ms=int(timeout_ms))
        if dir is not None:
            fields["dir"] = str(dir)
        if job_id is not None:
            fields["job_id"] = str(job_id)
        cfg = _fill(_c.hb_checkpoint_config(), fields, "checkpoint config")
        super().__init__(_c.hb_checkpoint_create(ctx._handle, cfg))
        self._ctx = ctx
        self._kept = []  # what C points into: alive while registered
        ctx._children.add(self)

    def add_table(self, table):
        """An hb.Embedding (its rows and optimizer slots)."""
        _c.hb_checkpoint_add_table(self._handle, table._handle)
        self._kept.append(table)

    def add_ps_dense(self, dense):
        """An hb.PsDense: its values and optimizer slots on the ps tasks."""
        _c.hb_checkpoint_add_ps_dense(self._handle, dense._handle)
        self._kept.append(dense)

    def add_collection(self, coll):
        """Every table of an hb.Collection."""
        _c.hb_checkpoint_add_collection(self._handle, coll._handle)
        self._kept.append(coll)

    def add_buffer(self, name, array, per_rank=False):
        """A C-contiguous, writable numpy array (or CUDA array), saved and
        restored in place. per_rank: this rank's own bytes (restored only at
        the same world size); otherwise the same on every rank (rank 0's are
        saved, every rank gets them back)."""
        nbytes, flags = _buffer(array)
        flags |= _c.HB_BUFFER_PER_RANK if per_rank else _c.HB_BUFFER_REPLICATED
        _c.hb_checkpoint_add_buffer(self._handle, str(name), array, nbytes, flags)
        self._kept.append(array)

    def add_reader(self, reader):
        """An hb.Reader: its position (what it handed out) is saved; a
        restore rebuilds its stream from there."""
        _c.hb_checkpoint_add_reader(self._handle, reader._handle)
        self._kept.append(reader)

    def add_metric(self, name, metric):
        """An hb.Metric's streaming state."""
        _c.hb_checkpoint_add_metric(self._handle, str(name), metric._handle)
        self._kept.append(metric)

    def set_meta(self, key, value):
        """Small metadata saved with the next checkpoint (None removes it)."""
        _c.hb_checkpoint_set_meta(self._handle, str(key), None if value is None else str(value))

    def get_meta(self, key, default=None):
        """The value of key (after a restore: the checkpoint's), or default."""
        try:
            return _c.hb_checkpoint_get_meta(self._handle, str(key))
        except HbError as e:
            if e.status != _c.HB_ERR_INVALID_ARGUMENT:
                raise
            return default

    def _check_alive(self):
        # C holds the registered handles: a closed one would dangle.
        for o in self._kept:
            if getattr(o, "closed", False):
                raise HbValueError("%s registered with this checkpoint is closed"
                                   % type(o).__name__)

    def save(self, step):
        """Collective, at a step boundary: one checkpoint tagged step."""
        self._check_alive()
        _c.hb_checkpoint_save(self._handle, int(step))

    def wait(self):
        """Wait until the last save is committed on every rank."""
        _c.hb_checkpoint_wait(self._handle)

    def finish(self):
        """Collective, after the last save: waits for its commit and marks
        the job finished, so an :class:`hb.Evaluator` following it ends."""
        _c.hb_checkpoint_finish(self._handle)

    def restore_latest(self):
        """Collective: restore the newest complete checkpoint; its step, or
        -1 for a fresh start (nothing changed)."""
        self._check_alive()
        return _c.hb_checkpoint_restore_latest(self._handle)

    def restore(self, path):
        """Collective: restore the checkpoint at path; its step."""
        self._check_alive()
        return _c.hb_checkpoint_restore(self._handle, str(path))

    @property
    def stats(self):
        """This rank's counters (hb_checkpoint_stats) as a dict."""
        out = np.zeros(len(_STATS), np.float64)
        _c.hbw_checkpoint_stats(self._handle, out)
        d = {k: (float(v) if k.endswith("seconds") else int(v)) for k, v in zip(_STATS, out)}
        d["restored_path"] = _c.hbw_checkpoint_restored_path(self._handle)
        return d

    @staticmethod
    def latest(dir):
        """(path, step) of the newest complete checkpoint in dir, or
        (None, -1); needs no context (an evaluator, a serving host)."""
        path, step = _c.hb_checkpoint_latest(str(dir))
        return (path or None), step
