"""hb.reader: sharded, parallel reading of Criteo-format files (hb_reader,
STABLE section of hb.h).

    with hb.Reader("data/part-*", ctx, batch_size=4096, num_threads=4) as r:
        for batch in r:            # this rank's share, parsed ahead
            batch.labels           # float32 (n,)
            batch.dense            # float32 (n, num_dense)
            batch.ids, batch.offsets   # the jagged categorical ids

Batch layout (the embedding collection's, TorchRec's KeyedJaggedTensor
values/offsets): ``ids`` is int64, feature-major; ``offsets`` is int64 of
length ``num_sparse * n + 1``; feature f, sample i has the ids
``ids[offsets[f*n + i]:offsets[f*n + i + 1]]`` (none for an empty field, else
one). :meth:`Batch.feature` gives one feature's (ids, offsets) with offsets
from 0, as a per-table lookup wants them.

The arrays are views of the C batch (no copy); it is freed when the last of
them is gone. :meth:`Batch.to_torch` wraps them as torch tensors with
``torch.from_numpy`` (no copy either) when torch is installed.

With a context, the files are sharded over its ranks (hb.h documents how);
``Reader.next()`` returns None when this rank is out of data: pair it with
``ctx.data_sync(batch is not None)``.
"""

import ctypes

import numpy as np

from . import capi as _c
from . import _Handle, _fill

__all__ = ["Reader", "Batch"]


class _CBatch(ctypes.Structure):
    """hb_reader_batch, field for field (checked against the C accessors)."""

    _fields_ = [("size", ctypes.c_int64), ("num_dense", ctypes.c_int32),
                ("num_sparse", ctypes.c_int32), ("epoch", ctypes.c_int32),
                ("reserved", ctypes.c_int32), ("labels", ctypes.c_void_p),
                ("dense", ctypes.c_void_p), ("offsets", ctypes.c_void_p),
                ("ids", ctypes.c_void_p), ("num_ids", ctypes.c_int64)]


class _Owner:
    """Frees the C batch once no array views it any more."""

    def __init__(self, handle):
        self.handle = handle

    def __del__(self):
        _c.hb_reader_batch_free(self.handle)


def _view(owner, address, ctype, count, dtype):
    if count == 0:
        return np.empty(0, dtype)
    buf = (ctype * count).from_address(address)
    buf._owner = owner  # the array's base keeps the batch alive
    return np.frombuffer(buf, dtype)


class Batch:
    """One batch of samples; see the module documentation for the layout."""

    def __init__(self, handle):
        c = _CBatch.from_address(handle)
        # The ctypes mirror must agree with the C struct.
        assert c.size == _c.hbw_reader_batch_info(handle, 0)
        assert c.num_ids == _c.hbw_reader_batch_info(handle, 3)
        owner = _Owner(handle)
        n, nd, ns = c.size, c.num_dense, c.num_sparse
        self.size, self.num_dense, self.num_sparse, self.epoch = n, nd, ns, c.epoch
        self.labels = _view(owner, c.labels, ctypes.c_float, n, np.float32)
        self.dense = _view(owner, c.dense, ctypes.c_float, n * nd, np.float32).reshape(n, nd)
        self.offsets = _view(owner, c.offsets, ctypes.c_int64, ns * n + 1, np.int64)
        self.ids = _view(owner, c.ids, ctypes.c_int64, c.num_ids, np.int64)

    def __len__(self):
        return self.size

    def feature(self, f):
        """(ids, offsets) of categorical feature f: ids a view, offsets
        (n + 1 entries) rebased to start at 0."""
        if not 0 <= f < self.num_sparse:
            raise IndexError("feature %d of %d" % (f, self.num_sparse))
        n = self.size
        o = self.offsets[f * n:f * n + n + 1]
        return self.ids[o[0]:o[-1]], o - o[0]

    def lengths(self):
        """Ids per (feature, sample), shape (num_sparse, n)."""
        return np.diff(self.offsets).reshape(self.num_sparse, self.size)

    def to_torch(self):
        """dict of torch tensors sharing memory with this batch: labels,
        dense, ids, offsets (KeyedJaggedTensor values/offsets)."""
        try:
            import torch
        except ImportError as e:  # pragma: no cover - depends on the machine
            raise ImportError("Batch.to_torch needs torch") from e
        return {k: torch.from_numpy(getattr(self, k)) for k in ("labels", "dense", "ids", "offsets")}


class Reader(_Handle):
    """Reads Criteo-format files (paths and glob patterns; plain or gzip).

    ctx: an hb.Context whose rank/world shard the files (None: read
    everything, or pass shard_index/num_shards). config: any field of
    hb_reader_config (batch_size, columns, separator (a character or its
    code), log_dense, dense_missing, num_rows, hash, skip_bad_lines,
    max_line_bytes, num_threads, queue_depth, chunk_bytes, num_epochs,
    shuffle, seed, drop_last, shard_index, num_shards).
    """

    _destroy = staticmethod(_c.hb_reader_destroy)

    def __init__(self, paths, ctx=None, **config):
        if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__"):
            paths = [paths]
        paths = [str(p) for p in paths]
        if isinstance(config.get("separator"), str):
            config["separator"] = ord(config["separator"])
        cfg = _fill(_c.hb_reader_config(), config, "reader config")
        super().__init__(_c.hb_reader_create(ctx._handle if ctx is not None else None, paths, cfg))

    def next(self):
        """The next Batch of this rank, or None when it is out of data."""
        h = _c.hb_reader_next(self._handle)
        return Batch(h) if h else None

    def __iter__(self):
        while True:
            b = self.next()
            if b is None:
                return
            yield b

    def total_bytes(self):
        """The files' bytes laid end to end: the input of dynamic splits
        (set ps_split_samples to it; hb_reader_total_bytes). Plain files
        only."""
        return _c.hb_reader_total_bytes(self._handle)

    def seek_split(self, start, end):
        """Read split [start, end) of those bytes next, replacing what the
        reader was reading (hb_reader_seek_split)."""
        _c.hb_reader_seek_split(self._handle, int(start), int(end))

    def split_offset(self):
        """The offset to commit after the batches handed out so far in the
        current split (hb_reader_split_offset): a reader seeked to it reads
        exactly the lines not handed out yet; the split's end at its end."""
        return _c.hb_reader_split_offset(self._handle)

    def splits(self, ctx):
        """Batches of the splits ps task 0 hands this worker (ctx: the
        worker's hb.Context), each as ``(batch, split, offset)``: call
        ``ctx.ps_split_commit(split, offset)`` before the batch's pushes.
        Ends when every split is handed out."""
        while True:
            sp = ctx.ps_split_next()
            if sp is None:
                return
            self.seek_split(sp.start, sp.end)
            last = sp.start
            while True:
                b = self.next()
                offset = self.split_offset()
                if b is None:
                    if offset > last:  # the end, past the last line's start
                        ctx.ps_split_commit(sp.split, offset)
                    break
                last = offset
                yield b, sp.split, offset

    lines = property(lambda self: _c.hb_reader_lines(self._handle))
    skipped_lines = property(lambda self: _c.hb_reader_skipped_lines(self._handle))
    num_files = property(lambda self: _c.hb_reader_num_files(self._handle))
