"""hb's metrics and collectives taking tensors: Metric, data_sync,
all_reduce."""

import torch

import hb
from .._errors import HbTypeError, HbValueError
from ._tensors import _hb_array, _numpy, _on_torch_stream
from .ddp import _by_device


# ---- Metrics, data sync, collectives on tensors ---------------------------------------

class Metric(hb.Metric):
    """hb.Metric whose update takes tensors (any float dtype and device:
    they are detached and converted to float32 / int64 CPU copies where
    needed, CUDA tensors included, since hb's metrics run on the host;
    contiguous float32 CPU tensors are not copied)."""

    def update(self, labels, preds, weights=None, groups=None, convert=True):
        """Add samples (tensors or numpy arrays)."""
        def arr(x, dtype):
            return _numpy(x.to(dtype).reshape(-1)) if isinstance(x, torch.Tensor) else x
        super().update(arr(labels, torch.float32), arr(preds, torch.float32),
                       arr(weights, torch.float32), arr(groups, torch.int64), convert=convert)


def data_sync(ctx, batch, drop_remainder=False):
    """hb_data_sync for this step: (continue, feed_empty). batch: a tensor
    (data if it has elements), None (no data), or a bool."""
    if isinstance(batch, torch.Tensor):
        has = batch.numel() > 0
    else:
        has = bool(batch) if isinstance(batch, bool) else batch is not None
    return ctx.data_sync(has, drop_remainder)


def all_reduce(ctx, tensor, op=None):
    """Reduce a contiguous CPU or CUDA tensor in place over every rank
    (hb.SUM by default; CUDA: NCCL on torch's current stream); returns it.
    Collective."""
    if not isinstance(tensor, torch.Tensor):
        raise HbTypeError("tensor: expected a torch.Tensor, got %s" % type(tensor).__name__)
    _by_device([tensor], "tensor")
    if not tensor.is_contiguous():
        raise HbValueError("tensor: not contiguous (pass x.contiguous())")
    if tensor.device.type == "cuda":
        _on_torch_stream(ctx, tensor.device)
    a = _hb_array(tensor)
    ctx.allreduce(a, recv=a, op=op)
    return tensor
