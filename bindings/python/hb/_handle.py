"""The base of the handle classes (one C handle each) and the filling of
hb.h's config structs from keyword arguments."""

from ._errors import HbTypeError, HbValueError


# ---- Handles ----------------------------------------------------------------------

class _Handle:
    """Owns one C handle; close() (or leaving a with block) frees it."""

    _destroy = None

    def __init__(self, handle):
        self._h = handle

    @property
    def _handle(self):
        if not self._h:
            raise HbValueError("%s is closed" % type(self).__name__)
        return self._h

    @property
    def closed(self):
        """True once close() ran."""
        return not self._h

    def close(self):
        """Free the handle (not collective). Closing twice is fine."""
        h, self._h = self._h, 0
        if h:
            type(self)._destroy(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        if getattr(self, "_h", 0):
            self.close()


def _fill(struct, fields, what):
    for key, value in fields.items():
        if key in ("struct_size", "this", "thisown") or not hasattr(struct, key):
            raise HbTypeError("unknown %s field %r (known: %s)" % (
                what, key, ", ".join(k for k in dir(struct) if not k.startswith("_")
                                     and k not in ("struct_size", "this", "thisown"))))
        try:
            setattr(struct, key, value)
        except (TypeError, ValueError, OverflowError) as e:
            raise HbTypeError("%s field %r: %r does not fit its type (%s)" % (what, key, value, e)) from None
    return struct
