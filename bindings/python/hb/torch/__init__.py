"""hb.torch: hb under PyTorch (``import hb.torch``; ``import hb`` never imports torch).

- :class:`KeyedJaggedTensor`: per-feature ids in a jagged layout (keys,
  values, lengths or offsets, optional weights), as TorchRec's.
- :class:`EmbeddingCollection`: an ``nn.Module`` over sharded hb tables
  (:class:`TableConfig`: rows or dynamic, dim, pooling none / sum / mean /
  sqrtn, initializer, optimizer and its hyperparameters), run by one
  :class:`hb.Collection`. ``forward`` is one collection lookup for every
  feature and returns float32 tensors that carry autograd;
  ``loss.backward()`` is one collection update (reusing the lookup's plan)
  that hands their gradients to the tables, whose optimizer runs at the
  owning rank, fused with the exchange (as TorchRec's fused optimizers):
  the tables take no part in a torch optimizer.
- :class:`DistributedDataParallel` (and :func:`broadcast_parameters`,
  :func:`allreduce_gradients`): dense data parallelism; after backward the
  gradients are averaged with ``allreduce_many`` (hb's buckets), bit-equal
  on every rank.
- :class:`PsParameters`: a module's dense parameters on the job's ps tasks
  (parameter-server mode; pull before forward, push after backward).
- :class:`Metric`, :func:`data_sync`, :func:`all_reduce`: hb's metrics and
  collectives taking tensors.
- :func:`save` / :func:`load`: a module's dense state_dict and its hb tables
  in one checkpoint directory, loadable at another world size.

Tensors: CPU tensors are passed to hb without a copy when contiguous and of
the dtype hb needs (ids int64, rows float32). CUDA tensors are passed by
device pointer, also without a copy: an EmbeddingCollection whose tables
have ``device="cuda"`` keeps its rows on the GPU (hb GPU tables, still one
collection lookup and one collection update for all of them, outputs and
gradients as CUDA tensors), and gradients, parameters and :func:`all_reduce`
of CUDA tensors go through hb's NCCL path. hb's GPU work runs on torch's
current CUDA stream (hb.torch points the context's stream at it before
each call), so it is ordered with torch's kernels without a host
synchronization. Metrics run on the host (:class:`Metric` copies CUDA
tensors there).

Collectives: every rank runs the same forward/backward sequence. A rank
that has no data for a step passes an empty batch (see :func:`data_sync`)
and still calls ``backward``: each forward of an EmbeddingCollection in
training is matched by one backward on every rank.

The package's modules, by concern: ``jagged`` (KeyedJaggedTensor),
``config`` (TableConfig, the cross-rank config check), ``collection``
(EmbeddingCollection), ``ddp`` (dense data parallelism), ``ps`` (dense parameters on ps tasks), ``tensor_ops``
(metrics and collectives on tensors), ``checkpoint`` (save / load,
Checkpoint), ``_tensors`` (the hand-over of tensors to hb). Import from
``hb.torch``: the modules' layout may change.
"""

try:
    import torch  # noqa: F401
    from torch import nn  # noqa: F401
except ImportError as e:
    raise ImportError("hb.torch needs PyTorch (Debian: apt-get install python3-torch): %s" % e) from e

from .._errors import HbDeviceError, HbError, HbTypeError, HbValueError  # noqa: F401 (as before the split)
from .checkpoint import Checkpoint, load, save  # noqa: F401
from .collection import EmbeddingCollection, EmbeddingOutput  # noqa: F401
from .config import POOLINGS, TableConfig, _differences, _rank_list, _table_fields  # noqa: F401
from .ddp import DistributedDataParallel, _module_fields, allreduce_gradients, broadcast_parameters  # noqa: F401
from .jagged import KeyedJaggedTensor  # noqa: F401
from .ps import PsParameters  # noqa: F401
from .tensor_ops import Metric, all_reduce, data_sync  # noqa: F401

__all__ = ["KeyedJaggedTensor", "TableConfig", "EmbeddingCollection", "EmbeddingOutput", "DistributedDataParallel",
           "broadcast_parameters", "allreduce_gradients", "PsParameters", "Metric", "data_sync", "all_reduce",
           "save", "load", "POOLINGS"]
