"""Argument checks of the handles' calls: numpy (and CUDA) arrays handed to
C without a copy, or refused naming the parameter (hb/__init__.py's
docstring states the rules)."""

import numpy as np

from . import capi as _c
from ._clib import FLOAT16, FLOAT32, FLOAT64, INT32, INT64, UINT8  # noqa: F401
from ._device import DeviceArray as _DeviceArray, device_array as _device_array, \
    is_device_array as _is_device_array
from ._errors import HbDeviceError, HbTypeError, HbValueError


# numpy dtype -> hb dtype. bfloat16 has no numpy dtype: pass uint16 arrays
# with dtype=hb.BFLOAT16.
_HB_DTYPE = {
    np.dtype(np.float32): FLOAT32,  # noqa: F821
    np.dtype(np.float64): FLOAT64,  # noqa: F821
    np.dtype(np.float16): FLOAT16,  # noqa: F821
    np.dtype(np.int32): INT32,  # noqa: F821
    np.dtype(np.int64): INT64,  # noqa: F821
    np.dtype(np.uint8): UINT8,  # noqa: F821
}
_NP_DTYPE = {v: k for k, v in _HB_DTYPE.items()}


# ---- Argument checks ---------------------------------------------------------

def _array(x, param, dtype=None, writable=False, convert=False, device=False):
    """x itself when it can be handed to C without a copy; with convert (and
    not writable) a C-contiguous copy of dtype; raises otherwise. A CUDA
    array (__cuda_array_interface__) is a checked _DeviceArray when device
    is True (never converted: that would copy), an HbDeviceError otherwise."""
    if _is_device_array(x):
        if not device:
            raise HbDeviceError("%s: a CUDA array (%s), but this call takes host memory only; pass a "
                                "numpy array (copy it to the host yourself: x.get() / x.cpu().numpy())"
                                % (param, type(x).__name__))
        return _device_array(x, param, dtype, writable)
    if convert and not writable:
        try:
            x = np.ascontiguousarray(x, dtype=dtype)
        except (TypeError, ValueError) as e:
            raise HbTypeError("%s: cannot convert %s to a numpy array%s: %s"
                              % (param, type(x).__name__,
                                 "" if dtype is None else " of " + str(np.dtype(dtype)), e)) from None
    if not isinstance(x, np.ndarray):
        want = "" if dtype is None else " of dtype " + str(np.dtype(dtype))
        raise HbTypeError("%s: expected a numpy array, got %s (pass a C-contiguous numpy array%s, "
                          "or convert=True to convert)" % (param, type(x).__name__, want))
    if dtype is not None and x.dtype != np.dtype(dtype):
        raise HbTypeError("%s: expected dtype %s, got %s (pass x.astype(np.%s), or convert=True to "
                          "convert)" % (param, np.dtype(dtype), x.dtype, np.dtype(dtype)))
    if not x.flags.c_contiguous:
        raise HbValueError("%s: the array is not C-contiguous (pass np.ascontiguousarray(x), or "
                           "convert=True to copy)" % param)
    if writable and not x.flags.writeable:
        raise HbValueError("%s: the array is read-only" % param)
    return x


def _hb_dtype(arr, dtype, param):
    """The hb dtype of arr: inferred from its numpy dtype, or checked."""
    if dtype is None:
        try:
            return _HB_DTYPE[arr.dtype]
        except KeyError:
            raise HbTypeError(
                "%s: numpy dtype %s has no hb dtype (float32, float64, float16, int32, "
                "int64, uint8; bfloat16 as uint16 with dtype=hb.BFLOAT16)" % (param, arr.dtype)
            ) from None
    size = _c.hb_dtype_size(dtype)
    if size == 0:
        raise HbValueError("%s: unknown hb dtype %r" % (param, dtype))
    if arr.dtype.itemsize != size or arr.dtype.kind not in "fiu":
        raise HbTypeError("%s: numpy dtype %s does not hold hb dtype %d" % (param, arr.dtype, dtype))
    return dtype


def _counts(x, param, n):
    """n 64-bit counts or offsets (a list or an int64 array), or None."""
    if x is None:
        return None
    try:
        a = np.ascontiguousarray(x, dtype=np.int64)
    except (TypeError, ValueError) as e:
        raise HbTypeError("%s: expected %d integers, got %r: %s" % (param, n, x, e)) from None
    if a.ndim != 1 or a.size != n:
        raise HbValueError("%s: expected %d entries (one per rank), got shape %s" % (param, n, a.shape))
    return a


def _extent(counts, offsets):
    """Elements a counts/offsets layout spans."""
    if offsets is None:
        return int(counts.sum())
    return int(max((o + c for o, c in zip(offsets, counts)), default=0))


def _check_size(arr, want, param):
    if arr.size < want:
        raise HbValueError("%s: needs %d elements, the array has %d" % (param, want, arr.size))


def _same_memory(a, b, param_a, param_b):
    """Refuses a mix of host and CUDA arrays in one call."""
    if isinstance(a, _DeviceArray) != isinstance(b, _DeviceArray):
        raise HbDeviceError("%s is %s but %s is %s: pass both in host memory or both on the device"
                            % (param_a, _kind(a), param_b, _kind(b)))


def _kind(a):
    return "a CUDA array" if isinstance(a, _DeviceArray) else "host memory"


def _user(a):
    """What a call hands back: the caller's own object for a CUDA array."""
    return a.obj if isinstance(a, _DeviceArray) else a


def _memory(arr, param, device, what):
    """arr, or an HbDeviceError when its memory (host / CUDA) is not that of
    the table or collection (what) living on device (-1: the host)."""
    if isinstance(arr, _DeviceArray) != (device >= 0):
        raise HbDeviceError(
            "%s: %s, but this is a %s %s: pass %s" % (
                param, _kind(arr), "GPU (cuda:%d)" % device if device >= 0 else "host", what,
                "a CUDA array on that device" if device >= 0 else
                "a numpy array (or create the tables with device='cuda')"))
    return arr


def _device_index(device, ctx):
    """hb_embedding_config.device for device=: None / "cpu" / -1: host;
    "cuda": the context's CUDA device; "cuda:N" / N: device N."""
    if device is None or device == "cpu" or device == -1:
        return -1
    if isinstance(device, int) and not isinstance(device, bool) and device >= 0:
        return device
    if isinstance(device, str) and device.startswith("cuda"):
        spec = device[4:]
        if spec == "":
            where = ctx.device
            if not where.startswith("cuda:"):
                raise HbValueError("device: 'cuda', but the context's device is %r (this process sees "
                                   "%d CUDA devices): pass device='cuda:N'" % (where, ctx.num_gpus))
            return int(where[5:])
        if spec.startswith(":") and spec[1:].isdigit():
            return int(spec[1:])
    raise HbValueError("device: %r; pass 'cpu', 'cuda', 'cuda:N' or N >= 0" % (device,))
