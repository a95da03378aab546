"""hb.Metric: streaming metrics (hb_metric)."""

import numpy as np

from . import capi as _c
from ._arrays import _array
from ._errors import HbValueError
from ._handle import _Handle, _fill


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
