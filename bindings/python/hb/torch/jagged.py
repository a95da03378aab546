"""KeyedJaggedTensor: per-feature ids in a jagged layout, as TorchRec's."""

import numpy as np

import torch

from .._errors import HbValueError
from ._tensors import _tensor


# ---- Jagged input ----------------------------------------------------------------------

class KeyedJaggedTensor:
    """Ids of several features for one batch, jagged (TorchRec's layout).

    keys: feature names, F of them. values: int64 ids of every feature,
    feature-major: feature 0's bags for samples 0..B-1, then feature 1's...
    lengths (int64, F*B, ids per bag) or offsets (int64, F*B+1, bag
    boundaries into values, from 0 to len(values), non-decreasing): pass one
    (or both, consistent). weights: optional float32 per id (pooling weights;
    they receive no gradient). All 1-D and contiguous; values and weights
    are handed to hb without a copy. values may be a CUDA tensor (for GPU
    tables); weights then live on the same device, and lengths / offsets
    may be CPU or CUDA tensors (they are read on the host once, to check
    them and to split the batch: a small device-to-host copy). Anything
    else is an :class:`hb.HbError` naming what to pass.
    """

    def __init__(self, keys, values, lengths=None, offsets=None, weights=None):
        keys = list(keys)
        if not keys or not all(isinstance(k, str) for k in keys) or len(set(keys)) != len(keys):
            raise HbValueError("keys: expected distinct feature names (str), got %r" % (keys,))
        values = _tensor(values, "values", torch.int64)
        n = values.numel()
        if lengths is None and offsets is None:
            raise HbValueError("lengths / offsets: pass one of them")
        if lengths is not None:
            lengths = _tensor(lengths, "lengths", torch.int64)
            ln = lengths.cpu().numpy()
            if ln.size % len(keys):
                raise HbValueError("lengths: %d entries do not split into %d features" % (ln.size, len(keys)))
            if ln.size and ln.min() < 0:
                raise HbValueError("lengths: entry %d is negative (%d)" % (int(np.argmax(ln < 0)), ln.min()))
            off = np.zeros(ln.size + 1, np.int64)
            np.cumsum(ln, out=off[1:])
            if off[-1] != n:
                raise HbValueError("lengths: they sum to %d, values has %d ids" % (off[-1], n))
        if offsets is not None:
            offsets = _tensor(offsets, "offsets", torch.int64)
            of = offsets.cpu().numpy()
            if of.size < 1 or (of.size - 1) % len(keys):
                raise HbValueError("offsets: %d entries; expected F*B+1 for F=%d features"
                                   % (of.size, len(keys)))
            if of[0] != 0 or of[-1] != n:
                raise HbValueError("offsets: must run from 0 to len(values)=%d, got %d..%d" % (n, of[0], of[-1]))
            steps = np.diff(of)
            if steps.size and steps.min() < 0:
                i = int(np.argmax(steps < 0))
                raise HbValueError("offsets: not monotone at entry %d (%d after %d)" % (i + 1, of[i + 1], of[i]))
            if lengths is not None and not np.array_equal(of, off):
                raise HbValueError("offsets: disagree with lengths")
            off = of
        if weights is not None:
            weights = _tensor(weights, "weights", torch.float32, values.device)
            if weights.numel() != n:
                raise HbValueError("weights: %d entries, values has %d" % (weights.numel(), n))
        self._keys = keys
        self._values = values
        self._weights = weights
        self._offsets = off  # numpy int64, F*B+1
        self._stride = (off.size - 1) // len(keys)

    def keys(self):
        """Feature names, in order."""
        return list(self._keys)

    @property
    def device(self):
        """The device of values (and weights)."""
        return self._values.device

    def to(self, device):
        """This batch with values and weights on device (self if already there)."""
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:  # "cuda": torch's current device
            device = torch.device("cuda", torch.cuda.current_device())
        if device == self.device:
            return self
        w = None if self._weights is None else self._weights.to(device)
        return KeyedJaggedTensor(self._keys, self._values.to(device), offsets=torch.from_numpy(self._offsets),
                                 weights=w)

    def values(self):
        """Every id (int64 tensor), feature-major."""
        return self._values

    def weights(self):
        """Per-id float32 weights, or None."""
        return self._weights

    def offsets(self):
        """Bag boundaries (int64 tensor, F*B+1)."""
        return torch.from_numpy(self._offsets)

    def lengths(self):
        """Ids per bag (int64 tensor, F*B)."""
        return torch.from_numpy(np.diff(self._offsets))

    def stride(self):
        """B: bags per feature (the batch size)."""
        return self._stride

    def _span(self, key):
        """(first id, end id, offsets of its B bags relative to first)."""
        f = self._keys.index(key)
        b = self._stride
        off = self._offsets[f * b:(f + 1) * b + 1]
        return int(off[0]), int(off[-1]), off - off[0]

    def __getitem__(self, key):
        """(values, lengths, weights or None) of one feature."""
        lo, hi, off = self._span(key)
        w = None if self._weights is None else self._weights[lo:hi]
        return self._values[lo:hi], torch.from_numpy(np.diff(off)), w

    def __repr__(self):
        return "KeyedJaggedTensor(keys=%r, batch=%d, ids=%d%s)" % (
            self._keys, self._stride, self._values.numel(), ", weighted" if self._weights is not None else "")
