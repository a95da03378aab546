"""PsParameters: a module's dense parameters on the job's ps tasks."""

import numpy as np

import torch

import hb
from .._errors import HbDeviceError, HbTypeError
from .config import _OPTIMIZER_ARGS, _OPTIMIZERS, _code


class PsParameters:
    """The float32 CPU parameters of a module (or any list of them) as one
    hb.PsDense on the job's ps tasks (parameter-server mode, the dense
    counterpart of TableConfig placement="ps"; docs/parameter-servers.md).
    The parameters become views of one flat buffer: :meth:`pull` before the
    forward pass writes the ps tasks' values into them in place; after
    ``loss.backward()``, :meth:`push` sends their gradients (a missing
    gradient counts as zeros) and the ps tasks apply ``optimizer`` there,
    so no torch optimizer steps them. Neither is collective.

    name: unique per job (names the buffer on the ps tasks). optimizer and
    its arguments as TableConfig's ("adagrad", learning_rate,
    initial_accumulator ...). Every worker must create it with the same
    parameters (shapes and order) and config; the buffer starts from the
    values of the worker that creates it first.
    """

    def __init__(self, ctx, name, params, optimizer="sgd", learning_rate=0.01, **optimizer_args):
        self.params = list(params)
        for i, p in enumerate(self.params):
            if not isinstance(p, torch.Tensor):
                raise HbTypeError("params[%d]: expected a torch.Tensor, got %s" % (i, type(p).__name__))
            if p.device.type != "cpu" or p.dtype != torch.float32:
                err = HbDeviceError if p.device.type != "cpu" else HbTypeError
                raise err("params[%d]: a %s %s tensor; PsParameters holds float32 CPU parameters"
                          % (i, p.device, p.dtype))
        unknown = sorted(set(optimizer_args) - set(_OPTIMIZER_ARGS))
        if unknown:
            raise HbTypeError("PsParameters %r: unknown argument(s) %s (optimizer arguments: %s)"
                              % (name, unknown, ", ".join(_OPTIMIZER_ARGS)))
        sizes = [p.numel() for p in self.params]
        self._values = np.empty(sum(sizes), np.float32)
        self._grads = np.zeros(sum(sizes), np.float32)
        flat = torch.from_numpy(self._values)
        with torch.no_grad():
            for p, v in zip(self.params, flat.split(sizes)):
                v.copy_(p.reshape(-1))
                p.data = v.view_as(p)  # pull writes the parameters in place
        self._grad_views = torch.from_numpy(self._grads).split(sizes)
        self._dense = hb.PsDense(ctx, name, self._values.size, init=self._values,
                                 optimizer=_code(optimizer, _OPTIMIZERS, "optimizer"),
                                 learning_rate=float(learning_rate),
                                 **{k: float(v) for k, v in optimizer_args.items()})

    def pull(self):
        """The parameters as of this worker's step, written in place."""
        self._dense.pull(self._values)

    def push(self):
        """One optimizer step on the ps tasks with the parameters' gradients."""
        with torch.no_grad():
            for p, g in zip(self.params, self._grad_views):
                if p.grad is None:
                    g.zero_()
                else:
                    g.copy_(p.grad.reshape(-1))
        self._dense.push(self._grads)

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    def close(self):
        self._dense.close()
