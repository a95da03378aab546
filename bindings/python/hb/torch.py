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
"""

import contextlib
import hashlib
import json
import os

import numpy as np

try:
    import torch
    from torch import nn
except ImportError as e:
    raise ImportError("hb.torch needs PyTorch (Debian: apt-get install python3-torch): %s" % e) from e

import hb
from ._errors import HbDeviceError, HbError, HbTypeError, HbValueError

__all__ = ["KeyedJaggedTensor", "TableConfig", "EmbeddingCollection", "EmbeddingOutput", "DistributedDataParallel",
           "broadcast_parameters", "allreduce_gradients", "Metric", "data_sync", "all_reduce",
           "save", "load", "POOLINGS"]

POOLINGS = ("none", "sum", "mean", "sqrtn")


# ---- Tensors <-> numpy -----------------------------------------------------------------

def _unsupported_device(param, t):
    return HbError(hb.ERR_UNSUPPORTED, "HB_ERR_UNSUPPORTED",
                   "%s: a %s tensor; hb.torch takes CPU and CUDA tensors only: pass x.cpu()"
                   % (param, t.device))


def _tensor(t, param, dtype, device=None):
    """t itself: a contiguous 1-D CPU or CUDA tensor of dtype (on device,
    when given); refuses anything else."""
    if not isinstance(t, torch.Tensor):
        raise HbTypeError("%s: expected a torch.Tensor of %s, got %s" % (param, dtype, type(t).__name__))
    if t.device.type not in ("cpu", "cuda"):
        raise _unsupported_device(param, t)
    if device is not None and t.device != device:
        raise HbDeviceError("%s: a %s tensor, expected one on %s (pass x.to(%r))"
                            % (param, t.device, device, str(device)))
    if t.dtype != dtype:
        raise HbTypeError("%s: expected dtype %s, got %s (pass x.to(%s))" % (param, dtype, t.dtype, dtype))
    if t.dim() != 1:
        raise HbValueError("%s: expected a 1-D tensor, got shape %s" % (param, tuple(t.shape)))
    if not t.is_contiguous():
        raise HbValueError("%s: the tensor is not contiguous (pass x.contiguous())" % param)
    return t


def _on_torch_stream(ctx, device):
    """Points ctx's CUDA stream at torch's current stream on device: hb's
    kernels and NCCL calls then run in stream order with torch's, and their
    results are ready for torch's next kernels without a host sync."""
    stream = torch.cuda.current_stream(device).cuda_stream
    if ctx._cuda_stream != stream:
        ctx.set_cuda_stream(stream)


def _numpy(t):
    """Zero-copy numpy view of a contiguous CPU tensor (a copy otherwise)."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    return t.contiguous().numpy()


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


# ---- Table configuration --------------------------------------------------------------

_INITIALIZERS = {"zeros": "INIT_ZEROS", "constant": "INIT_CONSTANT", "uniform": "INIT_UNIFORM",
                 "normal": "INIT_NORMAL"}
_OPTIMIZERS = {"sgd": "OPT_SGD", "adagrad": "OPT_ADAGRAD", "adam": "OPT_ADAM", "ftrl": "OPT_FTRL"}
_PARTITIONS = {"mod": "PARTITION_MOD", "div": "PARTITION_DIV"}
_PLACEMENTS = {"workers": "PLACEMENT_WORKERS", "ps": "PLACEMENT_PS"}
_OPTIMIZER_ARGS = ("initial_accumulator", "beta1", "beta2", "epsilon", "l1", "l2", "lr_power")


def _code(value, table, what):
    if isinstance(value, str):
        try:
            return getattr(hb, table[value.lower()])
        except KeyError:
            raise HbValueError("%s: unknown %r (one of %s)" % (what, value, ", ".join(table))) from None
    return int(value)


class TableConfig:
    """One sharded table of an :class:`EmbeddingCollection`.

    name: unique per context (names checkpoint directories). dim: row width.
    num_rows: > 0 for ids [0, num_rows) (others are refused), 0 for a
    dynamic hash table of any int64 id. features: the feature names that
    look up this table (default ``[name]``; several features may share a
    table). pooling: "sum", "mean" (weighted: sum(w*x)/sum(w)), "sqrtn"
    (sum(w*x)/sqrt(sum(w*w))), or "none" (one row per id); an empty bag
    pools to zeros (and a zero denominator counts as 1). initializer: "zeros", "constant" (init_a), "uniform"
    [init_a, init_b), "normal" (mean init_a, stddev init_b); seed: a row's
    initial value depends on (seed, name, id) only, so any world size starts
    equal. optimizer: "sgd", "adagrad", "adam", "ftrl" with learning_rate
    and any of initial_accumulator, beta1, beta2, epsilon, l1, l2, lr_power.
    partition: "mod" (owner = id mod world) or "div" (blocks; static only).
    wire_dtype: hb.FLOAT32 (default), hb.FLOAT16 or hb.BFLOAT16 on the wire.
    device: "cpu" (default) or "cuda" / "cuda:N": a GPU table on the
    context's CUDA device (hb.Context's ``device`` option picks it, by
    default cuda:<local_rank>), whose inputs and outputs are CUDA tensors.
    The tables of one EmbeddingCollection share one device.
    placement: "workers" (default: sharded over the ranks) or "ps": the rows
    live on the job's ps tasks (parameter-server mode, host tables only;
    docs/parameter-servers.md). The tables of one EmbeddingCollection share
    one placement.
    """

    def __init__(self, name, dim, num_rows=0, features=None, pooling="sum", initializer="zeros",
                 init_a=0.0, init_b=0.0, seed=0, optimizer="sgd", learning_rate=0.01,
                 partition="mod", wire_dtype=None, device="cpu", placement="workers", **optimizer_args):
        unknown = sorted(set(optimizer_args) - set(_OPTIMIZER_ARGS))
        if unknown:
            raise HbTypeError("TableConfig %r: unknown argument(s) %s (optimizer arguments: %s)"
                              % (name, ", ".join(unknown), ", ".join(_OPTIMIZER_ARGS)))
        if pooling not in POOLINGS:
            raise HbValueError("TableConfig %r: pooling %r is not one of %s" % (name, pooling, POOLINGS))
        if not isinstance(dim, int) or dim <= 0 or not isinstance(num_rows, int) or num_rows < 0:
            raise HbValueError("TableConfig %r: dim must be > 0 and num_rows >= 0 (0: dynamic), got %r, %r"
                               % (name, dim, num_rows))
        if isinstance(device, torch.device):
            device = str(device)
        if not isinstance(device, str) or not (device in ("cpu", "cuda") or
                                               (device.startswith("cuda:") and device[5:].isdigit())):
            raise HbValueError("TableConfig %r: device %r; pass 'cpu', 'cuda' or 'cuda:N'" % (name, device))
        self.name, self.dim, self.num_rows, self.pooling = name, dim, num_rows, pooling
        self.device = device
        code = _code(placement, _PLACEMENTS, "placement")
        self.placement = next((k for k, v in _PLACEMENTS.items() if getattr(hb, v) == code), None)
        if self.placement is None:
            raise HbValueError("TableConfig %r: placement %r; pass 'workers' or 'ps'" % (name, placement))
        self.features = [name] if features is None else list(features)
        self.hb_config = dict(
            num_rows=num_rows, initializer=_code(initializer, _INITIALIZERS, "initializer"),
            init_a=float(init_a), init_b=float(init_b), seed=int(seed),
            optimizer=_code(optimizer, _OPTIMIZERS, "optimizer"), learning_rate=float(learning_rate),
            partition=_code(partition, _PARTITIONS, "partition"), placement=code,
            **{k: float(v) for k, v in optimizer_args.items()})
        if wire_dtype is not None:
            self.hb_config["wire_dtype"] = int(wire_dtype)

    def __repr__(self):
        return "TableConfig(%r, dim=%d, num_rows=%d, features=%r, pooling=%r, device=%r, placement=%r)" % (
            self.name, self.dim, self.num_rows, self.features, self.pooling, self.device, self.placement)


def _table_fields(i, cfg):
    """Every field of table i that ranks must pass alike, as (key, label,
    value text): the effective values (hb's defaults filled in), enums by
    name, the device by kind (the CUDA index is each rank's own)."""
    eff = hb.capi.hb_embedding_config()
    for k, v in cfg.hb_config.items():
        setattr(eff, k, v)
    names = {f: {getattr(hb, c): n for n, c in t.items()} for f, t in (
        ("initializer", _INITIALIZERS), ("optimizer", _OPTIMIZERS), ("partition", _PARTITIONS),
        ("placement", _PLACEMENTS))}
    wires = {hb.FLOAT32: "FLOAT32", hb.FLOAT16: "FLOAT16", hb.BFLOAT16: "BFLOAT16"}
    fields = [("name", repr(cfg.name)), ("dim", repr(cfg.dim)), ("num_rows", repr(cfg.num_rows)),
              ("features", repr(cfg.features)), ("pooling", repr(cfg.pooling)),
              ("device", repr(cfg.device.split(":")[0]))]
    for f in ("initializer", "init_a", "init_b", "seed", "optimizer", "learning_rate") + _OPTIMIZER_ARGS + (
            "partition", "wire_dtype", "placement"):
        v = getattr(eff, f)
        v = names[f].get(v, v) if f in names else wires.get(v, v) if f == "wire_dtype" else v
        fields.append((f, repr(v)))
    return [("tables[%d].%s" % (i, f), "table %d (%r) %s" % (i, cfg.name, f), v) for f, v in fields]


def _rank_list(ranks):
    """"rank 2", "ranks 0,1,5", "ranks 0-7,9" (runs of three or more), as hb's C messages."""
    parts, i = [], 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        if j < i + 2:
            j = i
        parts.append("%d-%d" % (ranks[i], ranks[j]) if j > i else str(ranks[i]))
        i = j + 1
    return ("rank " if len(ranks) == 1 else "ranks ") + ",".join(parts)


def _differences(descs, limit=8):
    """"label: v0 (ranks 0,2) vs v1 (rank 1); ..." for each field whose value
    differs between the ranks' descriptions (lists of (key, label, value);
    fields pair up by key; a field a rank lacks reads "(none)"), in rank 0's
    order: the format of hb's C messages (src/common/mismatch.h)."""
    labels = {}
    for d in descs:
        for key, label, _ in d:
            labels.setdefault(key, label)
    out = []
    for key, label in labels.items():
        groups = {}
        for r, d in enumerate(descs):
            groups.setdefault(next((v for k, _, v in d if k == key), "(none)"), []).append(r)
        if len(groups) > 1:
            out.append("%s: %s" % (label, " vs ".join("%s (%s)" % (v, _rank_list(rs))
                                                      for v, rs in groups.items())))
    more = "; and %d more fields" % (len(out) - limit) if len(out) > limit else ""
    return "; ".join(out[:limit]) + more


def _check_same_config(ctx, what, noun, desc):
    """Collective, once per construction: every rank must pass the same desc
    ([(key, label, value text)]). One allgather of its hash; only when the
    hashes differ are the descriptions exchanged, and then every rank raises
    HbValueError naming the ranks, each field that differs and every rank's
    value."""
    world = ctx.world_size
    if world == 1:
        return
    blob = json.dumps(desc).encode()
    mine = np.frombuffer(hashlib.sha256(blob).digest()[:8], np.int64).copy()
    hashes = ctx.allgather(mine).reshape(-1)
    differ = [r for r in range(1, world) if hashes[r] != hashes[0]]
    if not differ:
        return
    sizes = ctx.allgather(np.array([len(blob)], np.int64)).reshape(-1)
    packed = ctx.allgatherv(np.frombuffer(blob, np.uint8), sizes).tobytes()
    descs, at = [], 0
    for n in sizes:
        descs.append(json.loads(packed[at:at + n].decode()))
        at += n
    raise HbValueError("%s: ranks passed different %s (%s from rank 0): %s" % (
        what, noun, _rank_list(differ) + (" differs" if len(differ) == 1 else " differ"), _differences(descs)))


# ---- The embedding module --------------------------------------------------------------

# Pooling in the collection, per TableConfig pooling, for (unweighted,
# weighted) batches. The collection's MEAN divides by the id count (its
# gradient is G * (1/n), as nn.EmbeddingBag's); hb.torch's weighted mean
# divides by the sum of the weights, and sqrtn (no EmbeddingBag mode) keeps
# hb.torch's own rounding: both pool with SUM in C and divide here.
_COLLECTION_POOLING = {"none": ("POOLING_NONE", "POOLING_NONE"), "sum": ("POOLING_SUM", "POOLING_SUM"),
                       "mean": ("POOLING_MEAN", "POOLING_SUM"), "sqrtn": ("POOLING_SUM", "POOLING_SUM")}


class _Batch:
    """One forward's input, flat, in the collection's feature order (numpy
    views of the KeyedJaggedTensor's storage when its keys are in that order)."""

    __slots__ = ("coll", "values", "offsets", "weights", "b", "present", "dev_offsets")
    # offsets: numpy (the host's view, to split and pool). GPU tables: values
    # and weights are CUDA tensors and dev_offsets the offsets on the device
    # (what the collection reads). The per-table path: coll is None, values
    # and weights are tensors.

    def __init__(self, coll, values, offsets, weights, b, present, dev_offsets=None):
        self.coll, self.values, self.offsets, self.weights = coll, values, offsets, weights
        self.b, self.present, self.dev_offsets = b, present, dev_offsets


class _CollectionRows(torch.autograd.Function):
    """What one forward reads from hb: the pooled matrix and the unpooled
    rows of one collection lookup (backward: one collection update, which
    reuses the lookup's plan: one exchange); the per-table path, the rows
    of every table's ids (backward: one update per table, in table order on
    every rank)."""

    @staticmethod
    def forward(fctx, anchor, module, batch):
        fctx.module, fctx.batch = module, batch
        return module._lookup(batch)

    @staticmethod
    def backward(fctx, *grads):
        fctx.module._update(fctx.batch, *grads)
        return None, None, None


class EmbeddingOutput(dict):
    """What :class:`EmbeddingCollection` returns: ``{feature: tensor}``, plus
    ``pooled``, the (B, pooled_width) matrix every pooled feature's tensor
    is a column slice of (``columns[feature]`` = (first column, dim)), in the
    collection's feature order. Slicing ``pooled`` once instead of
    concatenating many features saves a copy and, in backward, one
    full-size gradient per feature."""

    def __init__(self, items, pooled, columns):
        super().__init__(items)
        self.pooled = pooled
        self.columns = columns


class EmbeddingCollection(nn.Module):
    """Sharded embedding tables as a module: ``forward(features)`` with a
    :class:`KeyedJaggedTensor` returns ``{feature: tensor}`` (an
    :class:`EmbeddingOutput`), float32, with autograd: pooled features give
    (B, dim), "none" gives (ids, dim) in the order of the feature's values.

    One :class:`hb.Collection` serves every table: a forward is one
    collection lookup for all features (at most three exchanges), the
    backward one collection update that reuses the lookup's plan (one
    exchange), whatever the number of tables. Keys in :meth:`feature_names`
    order are passed to hb without a copy; other orders and missing features
    (empty bags) are rearranged first.

    Training: ``loss.backward()`` sends every table its rows' gradients and
    the table's optimizer steps each touched row once (gradients of
    duplicate ids, also across ranks, are summed). average_gradients=True
    (default) scales them by 1/world_size first, matching
    :class:`DistributedDataParallel`'s averaging: each rank's loss is a mean
    over its own batch, equal batches per rank. With False they are summed
    over ranks: normalise the loss by the global batch yourself (uneven
    batches).

    The tables are not torch parameters (they are sharded and carry their own
    optimizer): state_dict() has none of them; :func:`save` / :func:`load`
    checkpoint them. ``tables`` maps names to the :class:`hb.Embedding`.
    Collective: every rank builds the same collection and runs every forward
    (empty batches allowed) and backward in the same order; with a table of
    pooling "mean", either every rank's batch carries weights or none does.
    Construction compares every rank's TableConfigs (every field, in order)
    and average_gradients / per_table: ranks that differ all raise
    HbValueError naming the table, the field and every rank's value.

    GPU tables (TableConfig device="cuda"): forward takes a CUDA
    KeyedJaggedTensor and returns CUDA tensors; the lookup and the update
    are still one collection call each (hb's device collection), on torch's
    current CUDA stream, bit-equal to host tables. The bag offsets go to
    the device once per forward (a small host-to-device copy).

    Parameter-server mode (TableConfig placement="ps", a job with ps tasks:
    ``hbrun --ps N`` or TF_CONFIG; the ps tasks run ``ctx.serve()``): the
    rows live on the ps tasks, forward pulls them and backward pushes the
    gradients, and neither is collective: each worker runs at its own pace
    (option ``staleness``; 0 gives the bits of sharded tables). Construction
    then compares no configs between the ranks, since that would form the
    workers' collective world, which a job that must survive a lost worker
    never forms (the ps tasks still refuse a table created with another
    config; keep pooling and features equal yourself). :func:`save` and
    :func:`load` write and read ps tables from rank 0 only.

    per_table=True: each table is looked up and updated on its own (in
    table order) and pooled by torch (embedding_bag). Slower; kept as an
    independent implementation of the same semantics that the tests compare
    the collection with (host or GPU tables), and for debugging.
    """

    def __init__(self, ctx, tables, average_gradients=True, per_table=False):
        super().__init__()
        self._ctx = ctx
        self._configs = list(tables)
        self.average_gradients = average_gradients
        self._feature_table = {}
        for i, cfg in enumerate(self._configs):
            if not isinstance(cfg, TableConfig):
                raise HbTypeError("tables[%d]: expected a TableConfig, got %s" % (i, type(cfg).__name__))
            for f in cfg.features:
                if f in self._feature_table:
                    raise HbValueError("feature %r is read by two tables" % f)
                self._feature_table[f] = i
        self._order = self.feature_names()
        self._none = [i for i, f in enumerate(self._order) if self._feature_config(f).pooling == "none"]
        devices = sorted({cfg.device for cfg in self._configs})
        if len(devices) > 1:
            raise HbValueError("tables: on devices %s; the tables of one EmbeddingCollection share one device"
                               % devices)
        placements = sorted({cfg.placement for cfg in self._configs})
        if len(placements) > 1:
            raise HbValueError("tables: placements %s; the tables of one EmbeddingCollection share one "
                               "placement (use one EmbeddingCollection per placement)" % placements)
        self.placement = placements[0] if placements else "workers"
        # hb.torch pools mean (weighted) and sqrtn itself, and scales the
        # gradients: the C collection cannot see these settings, so compare
        # every rank's whole configuration here, once.
        desc = [("tables", "tables", repr(len(self._configs))),
                ("average_gradients", "average_gradients", repr(bool(average_gradients))),
                ("per_table", "per_table", repr(bool(per_table)))]
        for i, cfg in enumerate(self._configs):
            desc += _table_fields(i, cfg)
        if self.placement != "ps":  # see the class doc
            _check_same_config(ctx, "hb.torch.EmbeddingCollection", "table configs", desc)
        self._tables, self._colls = [], {}
        try:
            for cfg in self._configs:
                self._tables.append(hb.Embedding(ctx, cfg.name, cfg.dim, device=cfg.device, **cfg.hb_config))
            gpu = self._tables[0].device if self._tables else -1
            self._device = torch.device("cuda", gpu) if gpu >= 0 else torch.device("cpu")
            self._on_gpu = gpu >= 0  # the collections take tensors (CUDA arrays), not numpy views
            self._per_table = bool(per_table)
            if self._per_table:
                self._init_per_table()
                return
            codes = [[getattr(hb, _COLLECTION_POOLING[self._feature_config(f).pooling][weighted])
                      for f in self._order] for weighted in (0, 1)]
            for weighted in (False, True):
                self._colls[weighted] = self._colls[False] if weighted and codes[1] == codes[0] else \
                    hb.Collection(ctx, [(self._tables[self._feature_table[f]], c)
                                        for f, c in zip(self._order, codes[weighted])])
        except BaseException:
            self.close()
            raise
        coll = self._colls[False]
        self._columns = {f: (coll.column(i), coll.dim(i)) for i, f in enumerate(self._order)
                         if coll.column(i) >= 0}
        self._widths = [dim for _, dim in self._columns.values()]  # column order: feature order

    def _init_per_table(self):
        """Columns of the pooled output (pooled features in feature order, as
        a collection's) and each table's range of features (contiguous: the
        feature order is the table order)."""
        self._columns, col = {}, 0
        for f in self._order:
            cfg = self._feature_config(f)
            if cfg.pooling != "none":
                self._columns[f] = (col, cfg.dim)
                col += cfg.dim
        self._widths = [dim for _, dim in self._columns.values()]
        self._table_features, at = [], 0
        for cfg in self._configs:
            self._table_features.append((at, at + len(cfg.features)))
            at += len(cfg.features)

    @property
    def device(self):
        """Where the tables live: cpu, or the CUDA device of GPU tables."""
        return self._device

    def _feature_config(self, feature):
        return self._configs[self._feature_table[feature]]

    @property
    def tables(self):
        """{table name: hb.Embedding}."""
        return {cfg.name: t for cfg, t in zip(self._configs, self._tables)}

    @property
    def configs(self):
        """The TableConfig of every table, in order."""
        return list(self._configs)

    def feature_names(self):
        """Every feature this collection reads, in table order (the order in
        which a KeyedJaggedTensor's keys are passed to hb without a copy)."""
        return [f for cfg in self._configs for f in cfg.features]

    def collection_stats(self):
        """This rank's hb.Collection counters (lookups, updates,
        reused_plans, rounds, ids, wire bytes ...), summed over the module's
        collections (a second one exists for weighted batches when a table
        pools with "mean"). per_table=True has no collection: HbError."""
        if self._per_table:
            raise HbError(hb.ERR_UNSUPPORTED, "HB_ERR_UNSUPPORTED",
                          "collection_stats: per_table=True looks the tables up one by one, without an "
                          "hb.Collection")
        colls = {id(c): c for c in self._colls.values()}.values()
        total = {}
        for c in colls:
            for k, v in c.stats().items():
                total[k] = total.get(k, 0) + v
        return total

    def close(self):
        """Free the collections and the tables (not collective)."""
        for c in {id(c): c for c in self._colls.values()}.values():
            c.close()
        for t in self._tables:
            t.close()

    # ---- Input --------------------------------------------------------------

    def _batch(self, features):
        """features as a flat batch in the collection's feature order."""
        keys = features._keys
        unknown = [k for k in keys if k not in self._feature_table]
        if unknown:
            raise HbValueError("features: unknown feature(s) %s (this collection reads %s)"
                               % (unknown, self._order))
        if features.device != self._device:
            raise HbDeviceError("features: ids on %s, but this collection's tables are on %s: pass "
                                "features.to(%r)" % (features.device, self._device, str(self._device)))
        per_table = self._per_table
        values, weights = features._values, features._weights
        coll = None if per_table else self._colls[weights is not None]
        b, off = features._stride, features._offsets
        tensors = per_table or self._on_gpu  # else numpy views, for the host collection
        if not tensors:
            values = values.numpy()
            weights = None if weights is None else weights.numpy()
        cat = torch.cat if tensors else np.concatenate
        if keys != self._order:  # rearrange: the collection's order, empty bags for missing keys
            at = {k: i for i, k in enumerate(keys)}
            spans = [(off[at[f] * b], off[(at[f] + 1) * b]) if f in at else (0, 0) for f in self._order]
            lengths = [np.diff(off[at[f] * b:(at[f] + 1) * b + 1]) if f in at else np.zeros(b, np.int64)
                       for f in self._order]
            offsets = np.zeros(len(self._order) * b + 1, np.int64)
            np.cumsum(np.concatenate(lengths), out=offsets[1:])
            values = cat([values[lo:hi] for lo, hi in spans])
            if weights is not None:
                weights = cat([weights[lo:hi] for lo, hi in spans])
            off = offsets
        if weights is not None and self._none and not per_table:
            # Rows of pooling "none" are not weighted: weight 1 there (the
            # per-table path pools itself, and does not weight them).
            weights = weights.clone() if tensors else weights.copy()
            for f in self._none:
                weights[off[f * b]:off[(f + 1) * b]] = 1.0
        have = set(keys)
        present = [f for f in self._order if f in have]
        dev_offsets = None
        if not per_table and self._on_gpu:  # the device collection reads them there
            dev_offsets = torch.from_numpy(off).to(self._device)
        return _Batch(coll, values, off, weights, b, present, dev_offsets)

    def _explain(self, batch):
        """Raises an HbValueError naming this rank's first out-of-range id, if any."""
        b, off = batch.b, batch.offsets
        for i, f in enumerate(self._order):
            cfg = self._feature_config(f)
            ids = batch.values[off[i * b]:off[(i + 1) * b]]
            if isinstance(ids, torch.Tensor):  # GPU tables: a copy, only to explain a failure
                ids = ids.cpu().numpy()
            if not cfg.num_rows or not ids.size:
                continue
            bad = (ids < 0) | (ids >= cfg.num_rows)
            if bad.any():
                raise HbValueError("features[%r]: id %d is out of range for table %r (num_rows %d)"
                                   % (f, ids[int(np.argmax(bad))], cfg.name, cfg.num_rows))

    # ---- The two calls that talk to hb ----------------------------------------

    def _use_stream(self):
        if self._device.type == "cuda":
            _on_torch_stream(self._ctx, self._device)

    def _table_ids(self, batch, t):
        """The ids of table t's features: one contiguous slice of values."""
        first, end = self._table_features[t]
        return batch.values[batch.offsets[first * batch.b]:batch.offsets[end * batch.b]]

    def _lookup(self, batch):
        """(pooled (B, pooled_width), unpooled rows, flat) tensors: one
        collection lookup (GPU tables: into CUDA tensors, on torch's
        stream). The per-table path: the rows of each table's ids, one
        lookup per table in table order (every rank the same)."""
        if batch.coll is None:
            self._use_stream()
            rows = []
            for t, table in enumerate(self._tables):
                ids = self._table_ids(batch, t)
                out = torch.empty((ids.numel(), table.dim), dtype=torch.float32, device=self._device)
                table.lookup(_hb_array(ids), out=_hb_array(out))
                rows.append(out)
            return tuple(rows)
        try:
            if batch.dev_offsets is None:
                pooled = torch.from_numpy(batch.coll.lookup(batch.values, batch.offsets, batch.weights))
                unpooled = batch.coll.last_unpooled
                unpooled = torch.from_numpy(unpooled) if unpooled is not None else torch.zeros(0)
            else:
                self._use_stream()
                dev, coll = self._device, batch.coll
                pooled = torch.empty((batch.b, coll.pooled_width), dtype=torch.float32, device=dev)
                unpooled = torch.empty(coll.unpooled_size(batch.offsets), dtype=torch.float32, device=dev)
                coll.lookup(batch.values, batch.dev_offsets, batch.weights, out=pooled,
                            unpooled=unpooled if coll._none else None, host_offsets=batch.offsets)
        except HbError as e:
            if e.status == hb.ERR_INVALID_ARGUMENT:
                self._explain(batch)  # this rank's ids: a clearer message than C's
            raise
        return pooled, unpooled

    def _update(self, batch, *grads):
        """One collection update (reusing the lookup's plan; GPU tables: the
        gradients stay CUDA tensors, on torch's stream); the per-table
        path: one update per table, in table order."""
        scale = 1.0 / self._ctx.world_size if self.average_gradients else 1.0

        def scaled(g):
            g = g.detach().to(torch.float32)
            return g * scale if scale != 1.0 else g

        if batch.coll is None:
            self._use_stream()
            for t, (table, g) in enumerate(zip(self._tables, grads)):
                table.apply_gradients(_hb_array(self._table_ids(batch, t)), _hb_array(scaled(g).contiguous()))
            return
        grad_pooled, grad_unpooled = grads
        if batch.dev_offsets is None:
            offsets, host_offsets = batch.offsets, None

            def arr(g):
                return _numpy(scaled(g))
        else:  # hb reads them on torch's stream, which orders their reuse after it
            self._use_stream()
            offsets, host_offsets = batch.dev_offsets, batch.offsets

            def arr(g):
                return scaled(g).contiguous()
        gu = arr(grad_unpooled) if batch.coll._none else None  # autograd gives zeros for unused outputs
        batch.coll.apply_gradients(batch.values, offsets, arr(grad_pooled), batch.weights, gu,
                                   host_offsets=host_offsets)

    # ---- Forward --------------------------------------------------------------

    def forward(self, features):
        """{feature: float32 tensor} for every feature of ``features`` (an
        :class:`EmbeddingOutput`, in feature_names() order)."""
        if not isinstance(features, KeyedJaggedTensor):
            raise HbTypeError("features: expected an hb.torch.KeyedJaggedTensor, got %s"
                              % type(features).__name__)
        batch = self._batch(features)
        if torch.is_grad_enabled():
            anchor = torch.empty(0, requires_grad=True)  # makes the rows part of the graph
            rows = _CollectionRows.apply(anchor, self, batch)
        else:
            rows = self._lookup(batch)
        if batch.coll is None:
            return self._pool_per_table(batch, rows)
        pooled, unpooled = rows
        b, off, w = batch.b, batch.offsets, batch.weights
        out, at, denom = {}, 0, None
        present = set(batch.present)
        for i, f in enumerate(self._order):
            pooling = self._feature_config(f).pooling
            if pooling == "none":
                dim = batch.coll.dim(i)
                n = int(off[(i + 1) * b] - off[i * b]) * dim
                if f in present:
                    out[f] = unpooled[at:at + n].view(-1, dim)
                at += n
            elif pooling == "sqrtn" or (pooling == "mean" and w is not None):
                # Pooled by SUM in C; divided here, in one op for every such feature.
                if denom is None:
                    denom = torch.ones(pooled.shape, device=pooled.device)
                col, dim = self._columns[f]
                denom[:, col:col + dim] = self._denominator(pooling, off[i * b:(i + 1) * b + 1], w, b,
                                                            pooled.device)[:, None]
        if denom is not None:
            pooled = pooled / denom  # x / 1 is x: the other features keep their bits
        # One split, not a slice per feature: backward then assembles the
        # pooled gradient with one copy, not a zero-filled (B, pooled_width)
        # tensor per feature summed up.
        for f, part in zip(self._columns, pooled.split(self._widths, dim=1)):
            if f in present:
                out[f] = part
        return EmbeddingOutput({f: out[f] for f in batch.present}, pooled, self._columns)

    def _pool_per_table(self, batch, rows):
        """The EmbeddingOutput of the per-table path from each table's rows:
        pooling in torch, on the tables' device (embedding_bag over the feature's rows, as
        nn.EmbeddingBag; its backward gives each row its bag's gradient)."""
        b, off, w, dev = batch.b, batch.offsets, batch.weights, self._device
        out, parts = {}, []
        for i, f in enumerate(self._order):
            t = self._feature_table[f]
            base = off[self._table_features[t][0] * b]
            lo, hi = int(off[i * b]), int(off[(i + 1) * b])
            r = rows[t][lo - base:hi - base]
            pooling = self._feature_config(f).pooling
            if pooling == "none":
                out[f] = r
                continue
            if b == 0:
                parts.append(r[:0])
                continue
            fw = None if w is None else w[lo:hi]
            bags = torch.from_numpy(off[i * b:(i + 1) * b] - lo).to(dev)
            # Weighted: the product rounded, then summed, as hb's collection
            # (embedding_bag's per_sample_weights would fuse them into an FMA).
            p = torch.nn.functional.embedding_bag(
                torch.arange(hi - lo, device=dev), r if fw is None else r * fw[:, None], bags,
                mode="mean" if pooling == "mean" and fw is None else "sum")
            if pooling == "sqrtn" or (pooling == "mean" and fw is not None):
                p = p / self._denominator(pooling, off[i * b:(i + 1) * b + 1], w, b, dev)[:, None]
            parts.append(p)
        pooled = torch.cat(parts, dim=1) if parts else torch.zeros((b, 0), device=dev)
        for f, part in zip(self._columns, pooled.split(self._widths, dim=1)):
            out[f] = part
        return EmbeddingOutput({f: out[f] for f in batch.present}, pooled, self._columns)

    @staticmethod
    def _denominator(pooling, offsets, w, b, device="cpu"):
        """Per bag: sqrt(n) (sqrtn), sum(w) (weighted mean) or sqrt(sum(w*w))
        (weighted sqrtn), float32, the sums in double; 1 where it is 0.
        (Unweighted mean is the collection's own MEAN.) w: the batch's
        weights, numpy (host tables) or a CUDA tensor (GPU tables)."""
        lengths = np.diff(offsets)
        if w is None:
            denom = torch.from_numpy(lengths.astype(np.float32)).to(device).sqrt()
        elif isinstance(w, torch.Tensor):  # summed per bag on the device, in double
            wd = w[offsets[0]:offsets[-1]].double()
            bags = torch.from_numpy(offsets[:-1] - offsets[0]).to(device)
            s = torch.nn.functional.embedding_bag(torch.arange(wd.numel(), device=device),
                                                  (wd if pooling == "mean" else wd * wd)[:, None], bags,
                                                  mode="sum")[:, 0]
            denom = (s if pooling == "mean" else s.sqrt()).float()
        else:
            seg = np.repeat(np.arange(b, dtype=np.int64), lengths)
            wd = w[offsets[0]:offsets[-1]].astype(np.float64)
            s = np.bincount(seg, weights=wd if pooling == "mean" else wd * wd, minlength=b)
            denom = torch.from_numpy((s if pooling == "mean" else np.sqrt(s)).astype(np.float32))
        return torch.where(denom != 0, denom, torch.ones_like(denom))  # empty bags stay 0


# ---- Dense data parallelism -----------------------------------------------------------

def _tensors_of(obj, buffers):
    if isinstance(obj, nn.Module):
        out = list(obj.parameters())
        if buffers:
            out += list(obj.buffers())
        return out
    return list(obj)


def _by_device(tensors, what):
    """{device: [(index, tensor)]} in first-seen order (the same on every
    rank for the same module); refuses devices other than CPU and CUDA."""
    groups = {}
    for i, t in enumerate(tensors):
        if t.device.type not in ("cpu", "cuda"):
            raise _unsupported_device("%s[%d]" % (what, i), t)
        groups.setdefault(t.device, []).append(t)
    return groups


def _hb_array(t):
    """What hb is handed for a contiguous tensor: a zero-copy numpy view
    (CPU), or the detached tensor itself, read by device pointer (CUDA:
    after pointing the context at torch's current stream)."""
    return t.detach().numpy() if t.device.type == "cpu" else t.detach()


def broadcast_parameters(ctx, module, root=0):
    """Copy root's parameters and buffers (a module, or an iterable of
    tensors) to every rank, in place, in one broadcast per device (CPU
    tensors by Gloo, CUDA tensors by NCCL on torch's current stream).
    Collective."""
    tensors = [t for t in _tensors_of(module, buffers=True) if t.numel()]
    for device, group in _by_device(tensors, "parameters").items():
        if device.type == "cuda":
            _on_torch_stream(ctx, device)
        # Each tensor at a 16-byte aligned offset, so its bytes view back as its dtype.
        at = [0]
        for t in group:
            at.append(at[-1] + -(-t.numel() * t.element_size() // 16) * 16)
        packed = torch.zeros(at[-1], dtype=torch.uint8, device=device)
        for t, pos in zip(group, at):
            packed[pos:pos + t.numel() * t.element_size()] = t.detach().contiguous().reshape(-1).view(torch.uint8)
        ctx.broadcast(_hb_array(packed), root=root)
        with torch.no_grad():
            for t, pos in zip(group, at):
                t.copy_(packed[pos:pos + t.numel() * t.element_size()].view(t.dtype).reshape(t.shape))


def allreduce_gradients(ctx, params, average=True):
    """Allreduce the .grad of params (a module or an iterable) in place:
    hb.AVG (average=True) or hb.SUM, fused into buckets with
    allreduce_many, one call per dtype. A parameter without a gradient gets
    zeros first, so every rank reduces the same list. Results are bit-equal
    on every rank (hb's rank-order allreduce). CUDA gradients are reduced
    on the device by NCCL (one call per device and dtype), on torch's
    current stream. Collective."""
    params = [p for p in _tensors_of(params, buffers=False) if p.requires_grad]
    groups = {}
    for device, group in _by_device(params, "parameters").items():
        for p in group:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            groups.setdefault((device, p.grad.dtype), []).append(p.grad)
    op = hb.AVG if average else hb.SUM
    for (device, _), grads in groups.items():
        if device.type == "cuda":
            _on_torch_stream(ctx, device)
        views = [g if g.is_contiguous() else g.contiguous() for g in grads]
        ctx.allreduce_many([_hb_array(v) for v in views], op=op)
        for g, v in zip(grads, views):
            if v is not g:
                g.copy_(v)


def _module_fields(module, average_gradients):
    """What ranks must wrap alike: every parameter's and buffer's name,
    shape, dtype and device kind, in order (what broadcast and the gradient
    allreduce pair up by position), and the averaging."""
    desc = [("average_gradients", "average_gradients", repr(bool(average_gradients)))]
    for kind, items in (("parameter", module.named_parameters()), ("buffer", module.named_buffers())):
        items = list(items)
        desc.append((kind + "s", kind + "s", repr(len(items))))
        for i, (name, t) in enumerate(items):
            key, label = "%ss[%d]." % (kind, i), "%s %d (%r) " % (kind, i, name)
            desc += [(key + "name", "%s %d name" % (kind, i), repr(name)),
                     (key + "shape", label + "shape", repr(tuple(t.shape))),
                     (key + "dtype", label + "dtype", str(t.dtype)),
                     (key + "device", label + "device", repr(t.device.type)),
                     (key + "requires_grad", label + "requires_grad", repr(t.requires_grad))]
    return desc


class _SyncAfterBackward(torch.autograd.Function):
    """Identity on the outputs; its backward queues the gradient allreduce
    to run once the whole backward pass is done (as torch's DDP does)."""

    @staticmethod
    def forward(fctx, ddp, *outputs):
        fctx.ddp = ddp
        return tuple(o.view_as(o) for o in outputs)

    @staticmethod
    def backward(fctx, *grads):
        fctx.ddp._queue_sync()
        return (None,) + grads


class DistributedDataParallel(nn.Module):
    """Data-parallel wrapper of a module whose dense parameters are
    replicated on every rank (an EmbeddingCollection inside keeps its
    sharded tables; they have no parameters).

    At construction every rank's parameters and buffers (name, shape, dtype,
    device kind, in order) and average_gradients are compared (ranks that
    differ all raise HbValueError naming the parameter, the field and every
    rank's value), then rank 0's parameters and buffers are broadcast. After
    each ``loss.backward()`` through this module's outputs, the gradients
    are allreduced (averaged, or summed with average_gradients=False) with
    hb's bucketed allreduce_many, bit-equal on every rank, before your
    optimizer's step. auto_sync=False: call :meth:`sync_gradients` yourself.
    Accumulating gradients over several backward passes: run all but the
    last forward inside :meth:`no_sync`. Every rank must run backward for
    every training forward.
    """

    def __init__(self, module, ctx, average_gradients=True, auto_sync=True, broadcast=True):
        super().__init__()
        self.module = module
        self._ctx = ctx
        self.average_gradients = average_gradients
        self.auto_sync = auto_sync
        self._sync_queued = False
        engine = getattr(torch.autograd.Variable, "_execution_engine", None)
        self._queue_callback = getattr(engine, "queue_callback", None)
        if auto_sync and self._queue_callback is None:
            raise HbError(hb.ERR_UNSUPPORTED, "HB_ERR_UNSUPPORTED",
                          "auto_sync: this torch has no autograd queue_callback; pass auto_sync=False "
                          "and call sync_gradients() after backward")
        _check_same_config(ctx, "hb.torch.DistributedDataParallel", "modules", _module_fields(
            module, average_gradients))
        if broadcast:
            broadcast_parameters(ctx, module)

    def forward(self, *args, **kwargs):
        """The module's outputs; in training their backward syncs gradients."""
        self._sync_queued = False  # a new step (even if the last backward failed midway)
        out = self.module(*args, **kwargs)
        if not (self.auto_sync and torch.is_grad_enabled()):
            return out
        return _map_tensors(out, lambda ts: _SyncAfterBackward.apply(self, *ts))

    @contextlib.contextmanager
    def no_sync(self):
        """Forwards inside this block do not sync their backward (gradient
        accumulation, as torch's DDP): sync with the last backward outside.
        EmbeddingCollection tables still step at every backward (their
        optimizer is fused into it)."""
        old, self.auto_sync = self.auto_sync, False
        try:
            yield
        finally:
            self.auto_sync = old

    def sync_gradients(self):
        """Allreduce the module's gradients now (collective)."""
        allreduce_gradients(self._ctx, self.module, self.average_gradients)

    def _queue_sync(self):
        if not self._sync_queued:
            self._sync_queued = True
            self._queue_callback(self._sync_now)

    def _sync_now(self):
        self._sync_queued = False
        self.sync_gradients()


def _map_tensors(out, fn):
    """out with every tensor that requires grad passed through fn (once, together)."""
    if isinstance(out, torch.Tensor):
        return fn([out])[0] if out.requires_grad else out
    items = list(out.items()) if isinstance(out, dict) else list(enumerate(out)) \
        if isinstance(out, (list, tuple)) else []
    keys = [k for k, v in items if isinstance(v, torch.Tensor) and v.requires_grad]
    if not keys:
        return out
    synced = dict(zip(keys, fn([dict(items)[k] for k in keys])))
    if isinstance(out, EmbeddingOutput):
        return EmbeddingOutput(((k, synced.get(k, v)) for k, v in items), out.pooled, out.columns)
    if isinstance(out, dict):
        return type(out)((k, synced.get(k, v)) for k, v in items)
    return type(out)(synced.get(k, v) for k, v in items)


# ---- Metrics, data sync, collectives on tensors ---------------------------------------

class Metric(hb.Metric):
    """hb.Metric whose update takes tensors (any float dtype and device:
    they are detached and converted to float32 / int64 CPU copies where
    needed, CUDA tensors included, since hb's metrics run on the host;
    contiguous float32 CPU tensors are not copied)."""

    def update(self, labels, preds, weights=None, groups=None, convert=True):
        """Add samples (tensors or numpy arrays)."""
        def arr(x, dtype):
            return _numpy(x.to(dtype).reshape(-1)) if isinstance(x, torch.Tensor) else x
        super().update(arr(labels, torch.float32), arr(preds, torch.float32),
                       arr(weights, torch.float32), arr(groups, torch.int64), convert=convert)


def data_sync(ctx, batch, drop_remainder=False):
    """hb_data_sync for this step: (continue, feed_empty). batch: a tensor
    (data if it has elements), None (no data), or a bool."""
    if isinstance(batch, torch.Tensor):
        has = batch.numel() > 0
    else:
        has = bool(batch) if isinstance(batch, bool) else batch is not None
    return ctx.data_sync(has, drop_remainder)


def all_reduce(ctx, tensor, op=None):
    """Reduce a contiguous CPU or CUDA tensor in place over every rank
    (hb.SUM by default; CUDA: NCCL on torch's current stream); returns it.
    Collective."""
    if not isinstance(tensor, torch.Tensor):
        raise HbTypeError("tensor: expected a torch.Tensor, got %s" % type(tensor).__name__)
    _by_device([tensor], "tensor")
    if not tensor.is_contiguous():
        raise HbValueError("tensor: not contiguous (pass x.contiguous())")
    if tensor.device.type == "cuda":
        _on_torch_stream(ctx, tensor.device)
    a = _hb_array(tensor)
    ctx.allreduce(a, recv=a, op=op)
    return tensor


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
