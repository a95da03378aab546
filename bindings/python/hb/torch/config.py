"""TableConfig and the cross-rank check that every rank built the same
tables (messages naming the fields and ranks that differ)."""

import hashlib
import json

import numpy as np

import torch

import hb
from .._errors import HbTypeError, HbValueError


# ---- Table configuration --------------------------------------------------------------

POOLINGS = ("none", "sum", "mean", "sqrtn")

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
