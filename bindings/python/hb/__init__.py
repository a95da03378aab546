"""hb: hybrid data-parallel and embedding-sharded training (Python binding).

A thin layer over the SWIG module ``hb.capi`` (one call per function of
hb.h). Buffers are numpy arrays: a C-contiguous array of the right dtype is
passed to C without a copy. Anything else is refused with an
:class:`HbTypeError` (wrong type or dtype) or :class:`HbValueError` (wrong
layout or size) that names the parameter and what to pass -- unless the
call is given ``convert=True``, the explicit opt-in that converts inputs
(lists, float64 arrays, strided views, CPU torch tensors) with
``np.ascontiguousarray(x, dtype)`` first, at the cost of a copy. Outputs
(``recv``, ``out``, ``allreduce_many``'s arrays) are never converted: they
are written in place. Results come back as numpy arrays.

CUDA arrays (``__cuda_array_interface__``: CuPy, torch CUDA tensors, Numba)
are passed by device pointer to the calls whose C side takes device memory
(the collectives, GPU tables: ``Embedding(..., device="cuda")``), on the
context's CUDA stream (:meth:`Context.set_cuda_stream`); calls that take
host memory only refuse them with :class:`HbDeviceError`.

Errors: every refusal of hb's own is an :class:`HbError` (``except
hb.HbError`` catches all of them): a failing libhb call carries its status
and hb_last_error(); an argument refused here is an :class:`HbTypeError` /
:class:`HbValueError` (status ``ERR_INVALID_ARGUMENT``) that is also a
``TypeError`` / ``ValueError``. Handles (:class:`Context`,
:class:`Embedding`, :class:`Collection`,
:class:`Metric`) are context managers.

PyTorch: ``import hb.torch`` (only then is torch imported) for an embedding
module with autograd, data-parallel gradients and checkpoints.

Constants are hb.h's without the ``HB_`` prefix: ``hb.FLOAT32``, ``hb.SUM``,
``hb.ERR_TIMEOUT``, ``hb.OPT_ADAGRAD``, ``hb.METRIC_AUC`` ...

Parameter servers (EXPERIMENTAL, docs/parameter-servers.md): a ps task
calls :meth:`Context.serve`; workers create tables with
``placement=hb.PLACEMENT_PS`` and dense buffers (:class:`PsDense`) on the ps
tasks, and mark reader positions with :meth:`Context.ps_set_position`.
"""

import collections

import numpy as np

from . import capi as _c
from ._clib import *  # noqa: F401,F403 (hb.h's constants: hb.FLOAT32, hb.SUM ...)
from ._device import DeviceArray as _DeviceArray, device_array as _device_array, \
    is_device_array as _is_device_array  # noqa: F401
from ._errors import HbArgumentError, HbDeviceError, HbError, HbTypeError, HbValueError  # noqa: F401 (public)

__version__ = "%d.%d.%d" % (VERSION_MAJOR, VERSION_MINOR, VERSION_PATCH)  # noqa: F821

# ---- Library-wide calls --------------------------------------------------------

def version_number():
    """Version of the loaded libhb (MAJOR * 10000 + MINOR * 100 + PATCH)."""
    return _c.hb_version_number()


def build_info():
    """One line describing the build and the machine."""
    return _c.hb_build_info()


def status_name(status):
    """Constant name of a status, e.g. "HB_ERR_TIMEOUT"."""
    return _c.hb_status_name(status)


def last_error():
    """hb_last_error() of the calling thread (HbError.message holds it too)."""
    return _c.hb_last_error()


def dtype_size(dtype):
    """Bytes per element of an hb dtype; 0 for an unknown one."""
    return _c.hb_dtype_size(dtype)


def get_option(name):
    """Process-wide value of an option (default plus HB_<NAME>) as a string."""
    return _c.hb_context_get_option(None, name)


OptionInfo = collections.namedtuple("OptionInfo", "name type default doc")


def describe_option(index):
    """OptionInfo of option number index (HbError past the last one)."""
    return OptionInfo(*_c.hb_option_describe(index))


def options():
    """OptionInfo of every option, in documentation order."""
    out = []
    while True:
        try:
            out.append(describe_option(len(out)))
        except HbError as e:
            if e.status != ERR_INVALID_ARGUMENT:  # noqa: F821
                raise
            return out


def tf_config_build(task_type, task_id, worker_hosts, ps_hosts=(), has_evaluator=False):
    """A TF_CONFIG JSON document (as the seed's set_tf_config)."""
    return _c.hb_tf_config_build(task_type, task_id, list(worker_hosts), list(ps_hosts),
                                 int(bool(has_evaluator)))


def shard_range(num_items, num_shards, shard, strict=False):
    """(begin, end) of shard's contiguous, even share of num_items items."""
    begin, end = _c.hb_shard_range(num_items, num_shards, shard, int(bool(strict)))
    return begin, end


Placement = collections.namedtuple("Placement", "build_ensemble train_subnetworks build_subnetwork")


def _placement(fn, num_workers, worker_index, num_subnetworks, *extra):
    if num_subnetworks < 0:
        raise HbValueError("num_subnetworks: must be >= 0, got %d" % num_subnetworks)
    build = np.zeros(num_subnetworks, dtype=np.int32)
    ensemble, train = fn(num_workers, worker_index, num_subnetworks, *extra, build)
    return Placement(bool(ensemble), bool(train), build.astype(bool))


def placement_replication(num_workers, worker_index, num_subnetworks):
    """AdaNet ReplicationStrategy answers for one worker (a Placement)."""
    return _placement(_c.hb_placement_replication, num_workers, worker_index, num_subnetworks)


def placement_round_robin(num_workers, worker_index, num_subnetworks, drop_remainder=False):
    """AdaNet RoundRobinStrategy answers for one worker (a Placement)."""
    return _placement(_c.hb_placement_round_robin, num_workers, worker_index, num_subnetworks,
                      int(bool(drop_remainder)))


# ---- Handles, one module each ------------------------------------------------------
# (the private helpers too: hb/reader.py, hb/checkpoint.py and hb.torch take
# them from the package)
from ._arrays import _HB_DTYPE, _NP_DTYPE, _array, _check_size, _counts, _device_index, \
    _extent, _hb_dtype, _kind, _memory, _same_memory, _user  # noqa: E402,F401
from ._handle import _Handle, _fill  # noqa: E402,F401
from .context import AllreduceRequest, Context, PS_SPLIT_LATER  # noqa: E402,F401
from .embedding import Embedding, PsDense  # noqa: E402,F401
from .collection import Collection  # noqa: E402,F401
from .metric import Metric  # noqa: E402,F401

# ---- Reader (hb/reader.py) ---------------------------------------------------
from .reader import Batch, Reader  # noqa: E402,F401

# ---- Job checkpoints (EXPERIMENTAL: hb/checkpoint.py) --------------------------
from .checkpoint import Checkpoint  # noqa: E402,F401
from .evaluator import Evaluator  # noqa: E402,F401
