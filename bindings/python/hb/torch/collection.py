"""EmbeddingCollection: an nn.Module over sharded hb tables, run by one
hb.Collection (lookups and updates with autograd)."""

import numpy as np

import torch
from torch import nn

import hb
from .._errors import HbDeviceError, HbError, HbTypeError, HbValueError
from ._tensors import _hb_array, _numpy, _on_torch_stream
from .config import TableConfig, _check_same_config, _table_fields
from .jagged import KeyedJaggedTensor


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
