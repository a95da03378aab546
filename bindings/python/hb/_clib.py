"""hb.h as Python sees it: its constants without the ``HB_`` prefix
(``FLOAT32``, ``SUM``, ``ERR_TIMEOUT`` ...) and the SWIG module's calls,
wrapped so that SWIG's own argument refusals are HbTypeError / HbValueError.
The modules of the package take both from here."""

import functools

from . import capi as _c
from ._errors import HbError, HbTypeError, HbValueError


__all__ = []  # the constants (hb/__init__.py exports them all)
for _name in dir(_c):
    if _name.startswith("HB_") and isinstance(getattr(_c, _name), int):
        globals()[_name[3:]] = getattr(_c, _name)
        __all__.append(_name[3:])
del _name


def _refusing_as_hb_errors(fn):
    """fn, with SWIG's own argument refusals (a str where an int is needed,
    a negative size) raised as HbTypeError / HbValueError."""
    @functools.wraps(fn)
    def call(*args):
        try:
            return fn(*args)
        except HbError:
            raise
        except (TypeError, OverflowError) as e:
            raise HbTypeError("%s: %s" % (fn.__name__, e)) from None
        except ValueError as e:
            raise HbValueError("%s: %s" % (fn.__name__, e)) from None
    return call


for _name, _fn in list(vars(_c).items()):
    if _name.startswith("hb_") and callable(_fn) and not isinstance(_fn, type) \
            and not getattr(_fn, "_hb_wrapped", False):
        _fn = _refusing_as_hb_errors(_fn)
        _fn._hb_wrapped = True
        setattr(_c, _name, _fn)
del _name, _fn
