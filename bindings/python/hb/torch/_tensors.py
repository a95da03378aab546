"""Tensors <-> numpy and hb arrays: the zero-copy hand-over of CPU and CUDA
tensors to hb, on torch's current CUDA stream."""

import torch

import hb
from .._errors import HbDeviceError, HbError, HbTypeError, HbValueError


# ---- Tensors <-> numpy -----------------------------------------------------------------

def _unsupported_device(param, t):
    return HbError(hb.ERR_UNSUPPORTED, "HB_ERR_UNSUPPORTED",
                   "%s: a %s tensor; hb.torch takes CPU and CUDA tensors only: pass x.cpu()"
                   % (param, t.device))


def _tensor(t, param, dtype, device=None):
    """t itself: a contiguous 1-D CPU or CUDA tensor of dtype (on device,
    when given); refuses anything else."""
    if not isinstance(t, torch.Tensor):
        raise HbTypeError("%s: expected a torch.Tensor of %s, got %s" % (param, dtype, type(t).__name__))
    if t.device.type not in ("cpu", "cuda"):
        raise _unsupported_device(param, t)
    if device is not None and t.device != device:
        raise HbDeviceError("%s: a %s tensor, expected one on %s (pass x.to(%r))"
                            % (param, t.device, device, str(device)))
    if t.dtype != dtype:
        raise HbTypeError("%s: expected dtype %s, got %s (pass x.to(%s))" % (param, dtype, t.dtype, dtype))
    if t.dim() != 1:
        raise HbValueError("%s: expected a 1-D tensor, got shape %s" % (param, tuple(t.shape)))
    if not t.is_contiguous():
        raise HbValueError("%s: the tensor is not contiguous (pass x.contiguous())" % param)
    return t


def _on_torch_stream(ctx, device):
    """Points ctx's CUDA stream at torch's current stream on device: hb's
    kernels and NCCL calls then run in stream order with torch's, and their
    results are ready for torch's next kernels without a host sync."""
    stream = torch.cuda.current_stream(device).cuda_stream
    if ctx._cuda_stream != stream:
        ctx.set_cuda_stream(stream)


def _numpy(t):
    """Zero-copy numpy view of a contiguous CPU tensor (a copy otherwise)."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    return t.contiguous().numpy()


def _hb_array(t):
    """What hb is handed for a contiguous tensor: a zero-copy numpy view
    (CPU), or the detached tensor itself, read by device pointer (CUDA:
    after pointing the context at torch's current stream)."""
    return t.detach().numpy() if t.device.type == "cpu" else t.detach()
