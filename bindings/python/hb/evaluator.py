"""The evaluator (hb.h "Evaluator", EXPERIMENTAL; docs/evaluator.md).

:class:`Evaluator` follows a training job's checkpoint directory: each
complete checkpoint once, oldest first, restored into the tables and numpy
buffers added (a subset of what training registered, by name), until
training has called :meth:`hb.Checkpoint.finish`::

    ev = hb.Evaluator(ctx, dir="/ckpt", job_id="job", log_path="eval.jsonl")
    ev.add_table(table); ev.add_buffer("w", w); ev.add_metric("auc", auc)
    for step in ev:                # restores each checkpoint in turn
        auc.update(labels, model(x))
        ev.report()                # {"auc": ...}; one JSON line in the log
"""

import numpy as np

from . import capi as _c
from . import _Handle, _fill
from .checkpoint import _buffer
from .context import PsSplit

_STATS = ("evaluated", "reported", "skipped", "last_step", "finished", "split_epoch",
          "split_epochs", "splits_done", "splits_open", "split_samples_done",
          "split_samples_total")


class Evaluator(_Handle):
    """Follows the checkpoints of job ``job_id`` in ``dir`` (collective over
    ctx, the evaluator's own context).

    dir / job_id: None takes the options checkpoint_dir / checkpoint_job_id.
    log_path: the JSON-lines log (None: none); an existing one is appended
    to after its last step. poll_ms, timeout_ms: how often
    :meth:`next` looks, and how long it waits at most (0: 200 ms, 10 min).
    """

    _destroy = staticmethod(_c.hb_evaluator_destroy)

    def __init__(self, ctx, dir=None, job_id=None, log_path=None, poll_ms=0,
                 timeout_ms=0):
        fields = dict(poll_ms=int(poll_ms), timeout_ms=int(timeout_ms))
        for k, v in (("dir", dir), ("job_id", job_id), ("log_path", log_path)):
            if v is not None:
                fields[k] = str(v)
        cfg = _fill(_c.hb_evaluator_config(), fields, "evaluator config")
        super().__init__(_c.hb_evaluator_create(ctx._handle, cfg))
        self._kept = []  # what C points into: alive while registered
        self._metrics = []
        ctx._children.add(self)

    def add_table(self, table):
        """An hb.Embedding created as training creates it."""
        _c.hb_evaluator_add_table(self._handle, table._handle)
        self._kept.append(table)

    def add_collection(self, coll):
        """Every table of an hb.Collection."""
        _c.hb_evaluator_add_collection(self._handle, coll._handle)
        self._kept.append(coll)

    def add_buffer(self, name, array):
        """A replicated buffer training registered under name: a writable,
        C-contiguous numpy (or CUDA) array of its size, restored in place."""
        nbytes, flags = _buffer(array)
        _c.hb_evaluator_add_buffer(self._handle, str(name), array, nbytes, flags)
        self._kept.append(array)

    def add_metric(self, name, metric):
        """An hb.Metric (of the evaluator's context), reset by each
        :meth:`next` and logged under name by :meth:`report`."""
        _c.hb_evaluator_add_metric(self._handle, str(name), metric._handle)
        self._kept.append(metric)
        self._metrics.append(str(name))

    def next(self):
        """Collective: waits for the next checkpoint, restores it and
        resets the metrics; its step, or -1 once training has finished."""
        return _c.hb_evaluator_next(self._handle)

    def report(self):
        """Collective: every metric's result, as a dict; rank 0 appends the
        checkpoint's JSON line to the log."""
        out = np.zeros(max(1, len(self._metrics)), np.float64)
        _c.hbw_evaluator_report(self._handle, out)
        return {k: float(v) for k, v in zip(self._metrics, out)}

    def __iter__(self):
        """The steps of the checkpoints, each restored in turn."""
        while True:
            step = self.next()
            if step < 0:
                return
            yield step

    @property
    def stats(self):
        """hb_evaluator_stats as a dict."""
        out = np.zeros(len(_STATS), np.float64)
        _c.hbw_evaluator_stats(self._handle, out)
        return {k: int(v) for k, v in zip(_STATS, out)}

    @property
    def open_splits(self):
        """The open splits of the dynamic-split queue in the checkpoint last
        restored (hb_evaluator_open_splits), as ``PsSplit`` tuples: ``start``
        is each one's committed offset (how far training got in it); [] when
        that checkpoint has no queue."""
        n = self.stats["splits_open"]
        v = np.zeros(6 * max(1, n), np.int64)
        _c.hbw_evaluator_open_splits(self._handle, v, n)
        return [PsSplit(*v[6 * i:6 * i + 6].tolist()) for i in range(n)]
