"""Checkpoints of a module: save / load (dense state_dict and hb tables in one
directory) and Checkpoint (hb.Checkpoint jobs with the torch state)."""

import os

import torch

import hb
from .._errors import HbError, HbValueError
from .collection import EmbeddingCollection
from .ddp import DistributedDataParallel


# ---- Checkpoints -------------------------------------------------------------------------

_DENSE = "dense.pt"


def _collections(module):
    if isinstance(module, DistributedDataParallel):
        module = module.module
    return module, [m for m in module.modules() if isinstance(m, EmbeddingCollection)]


def save(directory, module, ctx, optimizer=None):
    """Checkpoint module (its dense state_dict, plus optimizer's if given)
    and every EmbeddingCollection's tables into directory (collective;
    rank 0 writes the dense part, every rank its shards; rank 0 the whole of
    a ps table). A DistributedDataParallel is saved as its inner module."""
    module, colls = _collections(module)
    directory = str(directory)
    if ctx.rank == 0:
        os.makedirs(os.path.join(directory, "tables"), exist_ok=True)
        state = {"module": module.state_dict()}
        if optimizer is not None:
            state["optimizer"] = optimizer.state_dict()
        tmp = os.path.join(directory, _DENSE + ".tmp")
        torch.save(state, tmp)
        os.replace(tmp, os.path.join(directory, _DENSE))  # atomic
    ctx.barrier()
    for coll in colls:
        for name, table in coll.tables.items():
            if coll.placement != "ps" or ctx.rank == 0:  # one worker saves a ps table
                table.save(os.path.join(directory, "tables", name))
    ctx.barrier()


def load(directory, module, ctx, optimizer=None):
    """Load a :func:`save` checkpoint into module (and optimizer), at any
    world size: the tables re-shard (collective; every rank reads the
    dense part)."""
    module, colls = _collections(module)
    directory = str(directory)
    path = os.path.join(directory, _DENSE)
    if not os.path.exists(path):
        raise HbError(hb.ERR_IO, "HB_ERR_IO", "%s: no hb.torch checkpoint (missing %s)" % (directory, _DENSE))
    state = torch.load(path, map_location="cpu")
    module.load_state_dict(state["module"])
    if optimizer is not None:
        if "optimizer" not in state:
            raise HbValueError("optimizer: the checkpoint in %s holds no optimizer state" % directory)
        optimizer.load_state_dict(state["optimizer"])
    for coll in colls:
        for name, table in coll.tables.items():
            if coll.placement != "ps" or ctx.rank == 0:  # one worker loads a ps table
                table.load(os.path.join(directory, "tables", name))
    if any(coll.placement == "ps" for coll in colls):
        ctx.barrier()  # nobody pulls before rank 0's load is in


# ---- Job checkpoints (hb.Checkpoint) -----------------------------------------------------

_OPTIMIZER_FILE = "torch_optimizer.pt"
_OPTIMIZER_META = "hb.torch.optimizer.sha256"


def _buffer_name(key):
    """A checkpoint buffer name for a state_dict key (names are files: at
    most 64 of [A-Za-z0-9._-]; longer or odd keys get a digest)."""
    import hashlib
    import re
    name = "module." + key
    if len(name) <= 64 and re.fullmatch(r"[A-Za-z0-9._-]+", name):
        return name
    digest = hashlib.sha1(key.encode()).hexdigest()[:16]
    return "module." + re.sub(r"[^A-Za-z0-9._-]", "_", key)[:40] + "-" + digest


class Checkpoint:
    """Job checkpoints (:class:`hb.Checkpoint`) of a torch model: every
    EmbeddingCollection's tables (rows and optimizer slots), every tensor
    of ``module.state_dict()`` in place (parameters and buffers: zero-copy,
    bit for bit, CUDA tensors too), and the optimizer's ``state_dict()``
    (serialized by rank 0 into the checkpoint directory when the save
    starts, its SHA-256 in the checkpoint's metadata, so a damaged file is
    refused). A DistributedDataParallel is taken as its inner module.
    ``ckpt.hb`` is the :class:`hb.Checkpoint` underneath: register readers,
    metrics and more buffers there. config: hb.Checkpoint's (dir, keep,
    async_write, job_id, timeout_ms).

    Resume bit-identical at the same world size::

        ckpt = hb.torch.Checkpoint(ctx, model, optimizer, dir="/ckpt")
        ckpt.hb.add_reader(reader)
        step = ckpt.restore_latest() + 1  # 0: a fresh start
        ...
        if step % 100 == 0: ckpt.save(step)
    """

    def __init__(self, ctx, module, optimizer=None, **config):
        import weakref
        module, colls = _collections(module)
        self.hb = hb.Checkpoint(ctx, **config)
        self._ctx = ctx
        self._optimizer = optimizer
        self._saving = False
        for coll in colls:
            for table in coll._tables:
                self.hb.add_table(table)
        for key, t in module.state_dict().items():
            if not t.is_contiguous():
                raise HbValueError("state_dict()[%r]: not contiguous; a checkpoint saves "
                                   "tensors in place" % key)
            arr = t.detach() if t.device.type == "cuda" else t.detach().numpy()
            self.hb.add_buffer(_buffer_name(key), arr)
        me = weakref.ref(self)

        def on_save(event, path):
            c = me()
            if c is not None and c._saving:
                c._write_optimizer(path)
        ctx.add_listener(hb.EVENT_BEFORE_SAVE, on_save)

    def _write_optimizer(self, path):
        import hashlib
        import io
        if self._optimizer is None or self._ctx.rank != 0:
            return
        buf = io.BytesIO()
        torch.save(self._optimizer.state_dict(), buf)
        data = buf.getvalue()
        target = os.path.join(path, _OPTIMIZER_FILE)
        with open(target + ".tmp", "wb") as f:  # before the manifest: atomic
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(target + ".tmp", target)
        self.hb.set_meta(_OPTIMIZER_META, hashlib.sha256(data).hexdigest())

    def save(self, step):
        """Collective, at a step boundary (after optimizer.step())."""
        self._saving = True
        try:
            self.hb.save(step)
        finally:
            self._saving = False

    def wait(self):
        """Wait until the last save is committed."""
        self.hb.wait()

    def _read_optimizer(self):
        import hashlib
        import io
        path = self.hb.stats["restored_path"]
        want = self.hb.get_meta(_OPTIMIZER_META)
        target = os.path.join(path, _OPTIMIZER_FILE)
        if want is None or not os.path.exists(target):
            raise HbError(hb.ERR_CORRUPT, "HB_ERR_CORRUPT",
                          "%s: no optimizer state (%s) in this checkpoint" % (path, _OPTIMIZER_FILE))
        with open(target, "rb") as f:
            data = f.read()
        if hashlib.sha256(data).hexdigest() != want:
            raise HbError(hb.ERR_CORRUPT, "HB_ERR_CORRUPT",
                          "%s: checksum mismatch (damaged)" % target)
        self._optimizer.load_state_dict(torch.load(io.BytesIO(data), map_location="cpu"))

    def restore_latest(self):
        """Collective: restore the newest complete checkpoint (module,
        optimizer, tables and what ckpt.hb has registered); its step, or -1
        for a fresh start."""
        step = self.hb.restore_latest()
        if step >= 0 and self._optimizer is not None:
            self._read_optimizer()
        return step

    def restore(self, path):
        """Collective: restore the checkpoint at path; its step."""
        step = self.hb.restore(path)
        if self._optimizer is not None:
            self._read_optimizer()
        return step

    def close(self):
        """Wait for a pending save and free the handle."""
        self.hb.close()
