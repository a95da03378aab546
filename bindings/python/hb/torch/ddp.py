"""Dense data parallelism: DistributedDataParallel, broadcast_parameters,
allreduce_gradients (hb's allreduce_many buckets, bit-equal on every rank)."""

import contextlib

import torch
from torch import nn

import hb
from .._errors import HbError
from ._tensors import _hb_array, _on_torch_stream, _unsupported_device
from .collection import EmbeddingOutput
from .config import _check_same_config


# ---- Dense data parallelism -----------------------------------------------------------

def _tensors_of(obj, buffers):
    if isinstance(obj, nn.Module):
        out = list(obj.parameters())
        if buffers:
            out += list(obj.buffers())
        return out
    return list(obj)


def _by_device(tensors, what):
    """{device: [(index, tensor)]} in first-seen order (the same on every
    rank for the same module); refuses devices other than CPU and CUDA."""
    groups = {}
    for i, t in enumerate(tensors):
        if t.device.type not in ("cpu", "cuda"):
            raise _unsupported_device("%s[%d]" % (what, i), t)
        groups.setdefault(t.device, []).append(t)
    return groups


def broadcast_parameters(ctx, module, root=0):
    """Copy root's parameters and buffers (a module, or an iterable of
    tensors) to every rank, in place, in one broadcast per device (CPU
    tensors by Gloo, CUDA tensors by NCCL on torch's current stream).
    Collective."""
    tensors = [t for t in _tensors_of(module, buffers=True) if t.numel()]
    for device, group in _by_device(tensors, "parameters").items():
        if device.type == "cuda":
            _on_torch_stream(ctx, device)
        # Each tensor at a 16-byte aligned offset, so its bytes view back as its dtype.
        at = [0]
        for t in group:
            at.append(at[-1] + -(-t.numel() * t.element_size() // 16) * 16)
        packed = torch.zeros(at[-1], dtype=torch.uint8, device=device)
        for t, pos in zip(group, at):
            packed[pos:pos + t.numel() * t.element_size()] = t.detach().contiguous().reshape(-1).view(torch.uint8)
        ctx.broadcast(_hb_array(packed), root=root)
        with torch.no_grad():
            for t, pos in zip(group, at):
                t.copy_(packed[pos:pos + t.numel() * t.element_size()].view(t.dtype).reshape(t.shape))


def allreduce_gradients(ctx, params, average=True):
    """Allreduce the .grad of params (a module or an iterable) in place:
    hb.AVG (average=True) or hb.SUM, fused into buckets with
    allreduce_many, one call per dtype. A parameter without a gradient gets
    zeros first, so every rank reduces the same list. Results are bit-equal
    on every rank (hb's rank-order allreduce). CUDA gradients are reduced
    on the device by NCCL (one call per device and dtype), on torch's
    current stream. Collective."""
    params = [p for p in _tensors_of(params, buffers=False) if p.requires_grad]
    groups = {}
    for device, group in _by_device(params, "parameters").items():
        for p in group:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            groups.setdefault((device, p.grad.dtype), []).append(p.grad)
    op = hb.AVG if average else hb.SUM
    for (device, _), grads in groups.items():
        if device.type == "cuda":
            _on_torch_stream(ctx, device)
        views = [g if g.is_contiguous() else g.contiguous() for g in grads]
        ctx.allreduce_many([_hb_array(v) for v in views], op=op)
        for g, v in zip(grads, views):
            if v is not g:
                g.copy_(v)


def _module_fields(module, average_gradients):
    """What ranks must wrap alike: every parameter's and buffer's name,
    shape, dtype and device kind, in order (what broadcast and the gradient
    allreduce pair up by position), and the averaging."""
    desc = [("average_gradients", "average_gradients", repr(bool(average_gradients)))]
    for kind, items in (("parameter", module.named_parameters()), ("buffer", module.named_buffers())):
        items = list(items)
        desc.append((kind + "s", kind + "s", repr(len(items))))
        for i, (name, t) in enumerate(items):
            key, label = "%ss[%d]." % (kind, i), "%s %d (%r) " % (kind, i, name)
            desc += [(key + "name", "%s %d name" % (kind, i), repr(name)),
                     (key + "shape", label + "shape", repr(tuple(t.shape))),
                     (key + "dtype", label + "dtype", str(t.dtype)),
                     (key + "device", label + "device", repr(t.device.type)),
                     (key + "requires_grad", label + "requires_grad", repr(t.requires_grad))]
    return desc


class _SyncAfterBackward(torch.autograd.Function):
    """Identity on the outputs; its backward queues the gradient allreduce
    to run once the whole backward pass is done (as torch's DDP does)."""

    @staticmethod
    def forward(fctx, ddp, *outputs):
        fctx.ddp = ddp
        return tuple(o.view_as(o) for o in outputs)

    @staticmethod
    def backward(fctx, *grads):
        fctx.ddp._queue_sync()
        return (None,) + grads


class DistributedDataParallel(nn.Module):
    """Data-parallel wrapper of a module whose dense parameters are
    replicated on every rank (an EmbeddingCollection inside keeps its
    sharded tables; they have no parameters).

    At construction every rank's parameters and buffers (name, shape, dtype,
    device kind, in order) and average_gradients are compared (ranks that
    differ all raise HbValueError naming the parameter, the field and every
    rank's value), then rank 0's parameters and buffers are broadcast. After
    each ``loss.backward()`` through this module's outputs, the gradients
    are allreduced (averaged, or summed with average_gradients=False) with
    hb's bucketed allreduce_many, bit-equal on every rank, before your
    optimizer's step. auto_sync=False: call :meth:`sync_gradients` yourself.
    Accumulating gradients over several backward passes: run all but the
    last forward inside :meth:`no_sync`. Every rank must run backward for
    every training forward.
    """

    def __init__(self, module, ctx, average_gradients=True, auto_sync=True, broadcast=True):
        super().__init__()
        self.module = module
        self._ctx = ctx
        self.average_gradients = average_gradients
        self.auto_sync = auto_sync
        self._sync_queued = False
        engine = getattr(torch.autograd.Variable, "_execution_engine", None)
        self._queue_callback = getattr(engine, "queue_callback", None)
        if auto_sync and self._queue_callback is None:
            raise HbError(hb.ERR_UNSUPPORTED, "HB_ERR_UNSUPPORTED",
                          "auto_sync: this torch has no autograd queue_callback; pass auto_sync=False "
                          "and call sync_gradients() after backward")
        _check_same_config(ctx, "hb.torch.DistributedDataParallel", "modules", _module_fields(
            module, average_gradients))
        if broadcast:
            broadcast_parameters(ctx, module)

    def forward(self, *args, **kwargs):
        """The module's outputs; in training their backward syncs gradients."""
        self._sync_queued = False  # a new step (even if the last backward failed midway)
        out = self.module(*args, **kwargs)
        if not (self.auto_sync and torch.is_grad_enabled()):
            return out
        return _map_tensors(out, lambda ts: _SyncAfterBackward.apply(self, *ts))

    @contextlib.contextmanager
    def no_sync(self):
        """Forwards inside this block do not sync their backward (gradient
        accumulation, as torch's DDP): sync with the last backward outside.
        EmbeddingCollection tables still step at every backward (their
        optimizer is fused into it)."""
        old, self.auto_sync = self.auto_sync, False
        try:
            yield
        finally:
            self.auto_sync = old

    def sync_gradients(self):
        """Allreduce the module's gradients now (collective)."""
        allreduce_gradients(self._ctx, self.module, self.average_gradients)

    def _queue_sync(self):
        if not self._sync_queued:
            self._sync_queued = True
            self._queue_callback(self._sync_now)

    def _sync_now(self):
        self._sync_queued = False
        self.sync_gradients()


def _map_tensors(out, fn):
    """out with every tensor that requires grad passed through fn (once, together)."""
    if isinstance(out, torch.Tensor):
        return fn([out])[0] if out.requires_grad else out
    items = list(out.items()) if isinstance(out, dict) else list(enumerate(out)) \
        if isinstance(out, (list, tuple)) else []
    keys = [k for k, v in items if isinstance(v, torch.Tensor) and v.requires_grad]
    if not keys:
        return out
    synced = dict(zip(keys, fn([dict(items)[k] for k in keys])))
    if isinstance(out, EmbeddingOutput):
        return EmbeddingOutput(((k, synced.get(k, v)) for k, v in items), out.pooled, out.columns)
    if isinstance(out, dict):
        return type(out)((k, synced.get(k, v)) for k, v in items)
    return type(out)(synced.get(k, v) for k, v in items)
