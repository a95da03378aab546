"""hb.HbError and its family: every refusal of hb's own is an HbError.

``except hb.HbError`` catches both kinds:

- a failed libhb call: ``HbError`` with the hb_status of the call (e.g.
  ``hb.ERR_TIMEOUT``) and hb_last_error()'s message;
- an argument the Python layer refused before reaching libhb (wrong type,
  dtype, layout, size, a closed handle): ``HbTypeError`` or
  ``HbValueError``, both ``HbArgumentError`` with status
  ``hb.ERR_INVALID_ARGUMENT``. They also subclass Python's ``TypeError`` /
  ``ValueError`` (what these checks raised before), so ``except TypeError``
  code keeps working. The message names the parameter and what to pass.
"""

# HB_ERR_INVALID_ARGUMENT of hb.h (a stable ABI value); kept here so that this
# module imports without the compiled extension (capi imports it to raise).
_ERR_INVALID_ARGUMENT = 1


class HbError(Exception):
    """A failed hb call, or an argument hb refused.

    status  -- the hb_status code (an int, e.g. hb.ERR_TIMEOUT)
    name    -- its constant name, e.g. "HB_ERR_TIMEOUT"
    message -- what was wrong (hb_last_error() of the failing call)
    """

    def __init__(self, status, name, message):
        super().__init__(status, name, message)
        self.status = status
        self.name = name
        self.message = message

    def __str__(self):
        return "%s: %s" % (self.name, self.message)


class HbArgumentError(HbError):
    """An argument refused by the Python layer (status ERR_INVALID_ARGUMENT)."""

    def __init__(self, message):
        super().__init__(_ERR_INVALID_ARGUMENT, "HB_ERR_INVALID_ARGUMENT", message)

    def __reduce__(self):  # picklable (multiprocessing) with one argument
        return (type(self), (self.message,))


class HbTypeError(HbArgumentError, TypeError):
    """Wrong type or dtype: not a numpy array, float64 where float32 is needed."""


class HbValueError(HbArgumentError, ValueError):
    """Wrong value, size or layout: not C-contiguous, read-only, too small,
    a closed handle."""


class HbDeviceError(HbTypeError):
    """Memory of the wrong kind: a CUDA array (``__cuda_array_interface__``)
    where the call takes host memory only (metrics, collections, host
    tables), or a host array where it needs CUDA memory (a GPU table)."""
