"""CUDA arrays: objects exposing ``__cuda_array_interface__`` (CuPy arrays,
torch CUDA tensors, Numba device arrays), read without a copy.

hb takes their device pointer where its C call accepts CUDA memory (the
collectives; ids and rows of a GPU table; the batch, outputs and
gradients of a collection of GPU tables). The object must be
C-contiguous, unmasked and of the dtype the call needs; anything else is refused with an
:class:`HbError` subclass saying what to pass. Calls that take host memory
only refuse device arrays with :class:`HbDeviceError`: hb never copies
between host and device behind the caller's back.
"""

import numpy as np

from ._errors import HbDeviceError, HbTypeError, HbValueError


def is_device_array(x):
    """True when x exposes __cuda_array_interface__ (a CUDA array)."""
    if isinstance(x, np.ndarray):
        return False
    try:  # a torch CPU tensor's property raises AttributeError: not a device array
        return hasattr(x, "__cuda_array_interface__")
    except Exception:  # it has one but cannot give it now (torch: requires grad): device_array says why
        return True


class DeviceArray:
    """A checked view of a CUDA array: its pointer, shape and numpy dtype.

    Keeps the object alive while hb uses the pointer. ``_hb_device_ptr``
    is what the SWIG typemaps read (only for calls that accept device
    memory); ``stream`` is the producer's stream from the interface (v3),
    or None.
    """

    __slots__ = ("obj", "_hb_device_ptr", "shape", "dtype", "size", "readonly", "stream")

    def __init__(self, obj, ptr, shape, dtype, readonly=False, stream=None):
        self.obj = obj
        self._hb_device_ptr = ptr
        self.shape = shape
        self.dtype = dtype
        self.size = int(np.prod(shape, dtype=np.int64)) if shape else 1
        self.readonly = readonly
        self.stream = stream

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    def __repr__(self):
        return "DeviceArray(ptr=0x%x, shape=%s, dtype=%s)" % (self._hb_device_ptr, self.shape, self.dtype)


def _interface(x, param):
    try:
        cai = x.__cuda_array_interface__
    except Exception as e:  # torch: "requires grad", "bfloat16" ...
        raise HbTypeError("%s: cannot read __cuda_array_interface__ of %s: %s (pass a detached tensor "
                          "of a numeric dtype)" % (param, type(x).__name__, e)) from None
    if not isinstance(cai, dict):
        raise HbTypeError("%s: __cuda_array_interface__ of %s is a %s, not a dict"
                          % (param, type(x).__name__, type(cai).__name__))
    for key in ("shape", "typestr", "data"):
        if key not in cai:
            raise HbTypeError("%s: __cuda_array_interface__ of %s lacks %r" % (param, type(x).__name__, key))
    return cai


def _c_contiguous(shape, strides, itemsize):
    """True when strides (bytes, or None) describe a C-contiguous layout;
    the stride of an extent-1 axis is free (as numpy's flags)."""
    if strides is None or 0 in shape:
        return True
    want = itemsize
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent != 1 and stride != want:
            return False
        want *= extent
    return True


def device_array(x, param, dtype=None, writable=False):
    """x (with __cuda_array_interface__) as a checked DeviceArray."""
    cai = _interface(x, param)
    try:
        shape = tuple(int(d) for d in cai["shape"])
        got = np.dtype(cai["typestr"])
        data = cai["data"]
        ptr, readonly = int(data[0]), bool(data[1])
    except (TypeError, ValueError, IndexError) as e:
        raise HbTypeError("%s: malformed __cuda_array_interface__ (shape %r, typestr %r, data %r): %s"
                          % (param, cai.get("shape"), cai.get("typestr"), cai.get("data"), e)) from None
    if cai.get("mask") is not None:
        raise HbValueError("%s: a masked CUDA array; pass one without a mask" % param)
    if got.byteorder == ">" or got.kind not in "fiub":
        raise HbTypeError("%s: CUDA array of typestr %r; hb takes little-endian numeric arrays"
                          % (param, cai["typestr"]))
    if dtype is not None and got != np.dtype(dtype):
        raise HbTypeError("%s: expected a CUDA array of dtype %s, got %s (convert it on the device "
                          "first, e.g. x.astype(%s) / x.to(torch.%s))"
                          % (param, np.dtype(dtype), got, np.dtype(dtype), np.dtype(dtype)))
    strides = cai.get("strides")
    if strides is not None:
        strides = tuple(int(s) for s in strides)
        if len(strides) != len(shape):
            raise HbTypeError("%s: __cuda_array_interface__ has %d strides for %d dimensions"
                              % (param, len(strides), len(shape)))
    if not _c_contiguous(shape, strides, got.itemsize):
        raise HbValueError("%s: the CUDA array is not C-contiguous (strides %s for shape %s); pass a "
                           "contiguous copy (cupy.ascontiguousarray(x), x.contiguous())"
                           % (param, strides, shape))
    if writable and readonly:
        raise HbValueError("%s: the CUDA array is read-only" % param)
    arr = DeviceArray(x, ptr, shape, got, readonly, cai.get("stream"))
    if arr.size and not ptr:
        raise HbValueError("%s: the CUDA array has %d elements but a NULL pointer" % (param, arr.size))
    return arr


def refuse_device(x, param, call, instead="a numpy array"):
    """Raises HbDeviceError when x is a CUDA array: call takes host memory only."""
    if is_device_array(x):
        raise HbDeviceError("%s: a CUDA array (%s), but %s takes host memory only; pass %s (copy it "
                            "to the host yourself: x.get() / x.cpu().numpy())"
                            % (param, type(x).__name__, call, instead))
