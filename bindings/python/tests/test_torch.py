"""Single-process tests of hb.torch (ctest python_binding; skipped without torch).
Multi-rank training and checkpoints: torch_mp_check.py (ctest python_torch_*)."""

import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hb  # noqa: E402
import hb.torch as ht  # noqa: E402
from test_hb import _public_callables  # noqa: E402

torch.set_num_threads(1)
F = torch.nn.functional


def i64(x):
    return torch.tensor(x, dtype=torch.int64)


@pytest.fixture
def ctx():
    with hb.Context(rank=0, world_size=1) as c:
        yield c


@pytest.fixture(params=["collection", "per_table"])
def path(request):
    """How a module reads its tables: one hb.Collection (host tables), or
    one lookup / update per table with pooling in torch, the path of GPU
    tables, run here on host tables: its logic checked without a GPU."""
    return request.param


def module(ctx, tables, path):
    return ht.EmbeddingCollection(ctx, tables, per_table=path == "per_table")


def table_weights(table, n):
    return torch.from_numpy(table.lookup(np.arange(n, dtype=np.int64)))


# A batch of 4 samples with empty bags, duplicate ids and weights.
BAGS = [[1, 5, 5], [], [7], [0, 2, 9, 3]]
WEIGHTS = [[0.5, 2.0, -1.0], [], [3.0], [1.0, 0.25, 2.0, -0.75]]


def jagged(key="f", weighted=False):
    lengths = [len(b) for b in BAGS]
    w = torch.tensor([x for b in WEIGHTS for x in b], dtype=torch.float32) if weighted else None
    return ht.KeyedJaggedTensor([key], i64([x for b in BAGS for x in b]), lengths=i64(lengths), weights=w)


def reference_pool(weight, pooling, weighted):
    """Pooling computed from nn.EmbeddingBag where it has the mode, by hand otherwise."""
    values = i64([x for b in BAGS for x in b])
    offsets = i64(np.cumsum([0] + [len(b) for b in BAGS])[:-1].tolist())
    w = torch.tensor([x for b in WEIGHTS for x in b], dtype=torch.float32)
    if pooling == "sum" or (pooling == "mean" and not weighted):
        return F.embedding_bag(values, weight, offsets, mode=pooling,
                               per_sample_weights=w if weighted else None)
    rows = []
    for bag, bw in zip(BAGS, WEIGHTS):
        ww = bw if weighted else [1.0] * len(bag)
        s = sum((weight[i] * x for i, x in zip(bag, ww)), torch.zeros(weight.shape[1]))
        d = sum(ww) if pooling == "mean" else sum(x * x for x in ww) ** 0.5
        rows.append(s / d if bag else s)
    return torch.stack(rows)


@pytest.mark.parametrize("pooling", ["sum", "mean", "sqrtn"])
@pytest.mark.parametrize("weighted", [False, True])
def test_pooled_output_and_gradient_equal_plain_torch(ctx, pooling, weighted, path):
    rows, dim, lr = 12, 3, 1.0
    ec = module(ctx, [ht.TableConfig("t", dim, num_rows=rows, pooling=pooling, features=["f"],
                                     initializer="normal", init_b=0.5, seed=7,
                                     optimizer="sgd", learning_rate=lr)], path)
    weight = table_weights(ec.tables["t"], rows).requires_grad_()
    out = ec(jagged(weighted=weighted))["f"]
    want = reference_pool(weight, pooling, weighted)
    assert out.dtype == torch.float32 and out.shape == (len(BAGS), dim)
    assert torch.equal(out, want), (out, want)  # bit-equal with Debian's torch 1.13
    assert not out[1].any()  # the empty bag
    # The same upstream gradient through both; hb's SGD step (lr 1) must
    # equal weight - grad of plain torch (duplicate ids summed).
    upstream = torch.arange(len(BAGS) * dim, dtype=torch.float32).reshape(len(BAGS), dim) - 4
    (out * upstream).sum().backward()
    (want * upstream).sum().backward()
    after = table_weights(ec.tables["t"], rows)
    assert torch.equal(after, weight.detach() - lr * weight.grad)


@pytest.mark.parametrize("pooling", ["sum", "mean", "sqrtn"])
def test_one_id_per_bag_weighted(ctx, pooling):
    """The no-reduction path (every bag holds one id) pools as the general one."""
    ec = ht.EmbeddingCollection(ctx, [ht.TableConfig("one", 2, num_rows=5, pooling=pooling,
                                                     initializer="normal", init_b=1.0)])
    x = table_weights(ec.tables["one"], 5)[[1, 2, 3]]
    w = torch.tensor([2.0, -0.5, 0.0])
    got = ec(ht.KeyedJaggedTensor(["one"], i64([1, 2, 3]), lengths=i64([1, 1, 1]), weights=w))["one"]
    want = {"sum": x * w[:, None], "mean": x * torch.tensor([1.0, 1.0, 0.0])[:, None],
            "sqrtn": x * torch.tensor([1.0, -1.0, 0.0])[:, None]}[pooling]
    assert torch.allclose(got, want, rtol=1e-6, atol=0), (got, want)


def test_pooling_none_and_shared_tables_equal_plain_torch(ctx, path):
    """Two features reading one table (one lookup for both), one unpooled."""
    rows, dim = 16, 2
    ec = module(ctx, [
        ht.TableConfig("shared", dim, num_rows=rows, features=["a", "b"], pooling="sum",
                       initializer="uniform", init_a=-1, init_b=1, optimizer="sgd", learning_rate=0.5),
        ht.TableConfig("seq", dim, num_rows=rows, pooling="none", initializer="normal", init_b=1.0,
                       optimizer="adagrad", learning_rate=0.25, initial_accumulator=0.1)], path)
    w_shared = table_weights(ec.tables["shared"], rows).requires_grad_()
    w_seq = table_weights(ec.tables["seq"], rows).requires_grad_()
    # keys a, seq, b (any order); batch of 2.
    kjt = ht.KeyedJaggedTensor(["a", "seq", "b"], i64([1, 2, 3, 4, 5, 3, 3, 15]),
                               offsets=i64([0, 2, 3, 5, 6, 8, 8]))
    out = ec(kjt)
    ref_a = F.embedding_bag(i64([1, 2, 3]), w_shared, i64([0, 2]), mode="sum")
    ref_b = F.embedding_bag(i64([3, 15]), w_shared, i64([0, 2]), mode="sum")
    ref_seq = F.embedding(i64([4, 5, 3]), w_seq)
    for got, want in ((out["a"], ref_a), (out["b"], ref_b), (out["seq"], ref_seq)):
        assert torch.equal(got, want), (got, want)
    loss = (out["a"] * 2 + out["b"]).pow(2).sum() + (out["seq"] * out["seq"].detach() * 3).sum()
    loss.backward()
    (ref_a * 2 + ref_b).pow(2).sum().add((ref_seq * ref_seq.detach() * 3).sum()).backward()
    opt_shared = torch.optim.SGD([w_shared], lr=0.5)
    opt_seq = torch.optim.Adagrad([w_seq], lr=0.25, initial_accumulator_value=0.1, eps=1e-8)
    opt_shared.step()
    opt_seq.step()
    assert torch.equal(table_weights(ec.tables["shared"], rows), w_shared.detach())
    # Adagrad: hb computes lr*g/(sqrt(acc)+eps), torch lr*(g/(sqrt(acc)+eps)).
    assert torch.allclose(table_weights(ec.tables["seq"], rows), w_seq.detach(), rtol=1e-6, atol=1e-7)


MIXED = [  # (name, dim, num_rows, features, pooling, optimizer and its arguments)
    ("mx_sum", 3, 40, ["s1", "s2"], "sum", dict(optimizer="sgd", learning_rate=0.5)),
    ("mx_mean", 2, 0, ["dyn"], "mean", dict(optimizer="adagrad", learning_rate=0.3, initial_accumulator=0.1)),
    ("mx_sqrtn", 4, 40, ["q"], "sqrtn", dict(optimizer="adam", learning_rate=0.05)),
    ("mx_none", 5, 40, ["seq"], "none", dict(optimizer="ftrl", learning_rate=0.2, l1=0.01, l2=0.1)),
]


def mixed_configs():
    return [ht.TableConfig(n, d, num_rows=r, features=fs, pooling=p, initializer="normal", init_b=0.5, seed=11,
                           **o) for n, d, r, fs, p, o in MIXED]


def mixed_batch(step, keys, weighted):
    """A batch of 3 samples for keys (any order, any subset): empty bags,
    duplicates, huge ids for the dynamic table."""
    rng = np.random.RandomState(step)
    bags = {k: [list(rng.randint(0, 40, rng.randint(0, 4))) for _ in range(3)] for k in keys}
    if "dyn" in bags:
        bags["dyn"] = [[2 ** 50 + 3 * int(i) for i in bag] for bag in bags["dyn"]]
    flat = [bag for k in keys for bag in bags[k]]
    w = torch.tensor(rng.randint(-4, 8, sum(map(len, flat))) * 0.25, dtype=torch.float32) if weighted else None
    kjt = ht.KeyedJaggedTensor(keys, i64([i for bag in flat for i in bag]), lengths=i64([len(b) for b in flat]),
                               weights=w)
    return kjt, bags


def reference_feature(rows, bags, w, pooling):
    """One feature from a leaf tensor of its rows (one per id, in order):
    nn.EmbeddingBag where it has the mode, by hand otherwise (as hb.torch
    documents the mode). Weighted bags by hand too: torch's weighted
    EmbeddingBag kernel fuses w * x + acc into one FMA (one rounding), hb
    rounds the product and the sum (docs/embedding-collections.md)."""
    n = [len(b) for b in bags]
    if pooling == "none":
        return rows
    if pooling in ("sum", "mean") and w is None:
        return F.embedding_bag(torch.arange(sum(n)), rows, i64(np.cumsum([0] + n)[:-1].tolist()), mode=pooling)
    out, at = [], 0
    for k in n:
        ww = [1.0] * k if w is None else w[at:at + k].tolist()
        s = sum((rows[at + j] * ww[j] for j in range(k)), torch.zeros(rows.shape[1]))
        d = {"sum": 1.0, "mean": sum(ww), "sqrtn": sum(x * x for x in ww) ** 0.5}[pooling]
        out.append(s / d if k and d else s)
        at += k
    return torch.stack(out)


def test_mixed_tables_in_one_module_equal_single_table_calls(ctx, path):
    """Tables of different dims, poolings, optimizers and a dynamic one in
    one module (one collection): outputs and every table after each step
    bit-equal to the single-table calls (lookup, pooling as plain torch,
    apply_gradients of the per-id gradients) on twin tables; weighted and
    unweighted batches, keys in another order and a missing feature."""
    ec = module(ctx, mixed_configs(), path)
    twin_ctx = hb.Context(rank=0, world_size=1)  # same names, so the same initial rows
    twins = {c.name: hb.Embedding(twin_ctx, c.name, c.dim, **c.hb_config) for c in mixed_configs()}
    table_of = {f: (n, p) for n, _, _, fs, p, _ in MIXED for f in fs}
    runs = [(["s1", "s2", "dyn", "q", "seq"], False), (["s1", "s2", "dyn", "q", "seq"], True),
            (["seq", "q", "s1", "dyn"], True), (["dyn", "s2", "s1", "q", "seq"], False)]
    for step, (keys, weighted) in enumerate(runs):
        kjt, bags = mixed_batch(step, keys, weighted)
        out = ec(kjt)
        assert list(out) == [f for f in ec.feature_names() if f in keys]
        loss, per_table, at = 0, {}, 0
        ref_rows, weights = {}, kjt.weights()
        for k in keys:
            name, pooling = table_of[k]
            ids = np.array([i for bag in bags[k] for i in bag], np.int64)
            rows = torch.from_numpy(twins[name].lookup(ids)).requires_grad_()
            w = None if weights is None or pooling == "none" else weights[at:at + ids.size]
            want = reference_feature(rows, bags[k], w, pooling)
            assert torch.equal(out[k], want), (step, k, out[k], want)
            up = torch.randn(want.shape, generator=torch.Generator().manual_seed(step * 10 + len(k)))
            loss = loss + (out[k] * up).sum()
            (want * up).sum().backward()
            ref_rows[k] = (name, ids, rows)
            at += ids.size
        loss.backward()
        for k in ec.feature_names():  # a table's ids: its features in the module's order
            if k in ref_rows:
                name, ids, rows = ref_rows[k]
                per_table.setdefault(name, []).append((ids, rows.grad.numpy()))
        for name, parts in per_table.items():
            twins[name].apply_gradients(np.concatenate([i for i, _ in parts]),
                                        np.ascontiguousarray(np.concatenate([g for _, g in parts])))
        for name, _, _, fs, _, _ in MIXED:
            every = np.unique(np.concatenate([[i for b in mixed_batch(s, runs[s][0], False)[1].get(f, [])
                                               for i in b] for s in range(step + 1) for f in fs] + [[0]]))
            every = every.astype(np.int64)
            assert np.array_equal(ec.tables[name].lookup(every), twins[name].lookup(every)), (step, name)
    if path == "per_table":
        with pytest.raises(hb.HbError, match="without an hb.Collection"):
            ec.collection_stats()
        return
    st = ec.collection_stats()
    assert st["lookups"] == 4 and st["updates"] == 4 and st["reused_plans"] == 4, st


def test_one_collection_exchange_per_direction(ctx):
    """However many tables: a forward is one collection lookup (3 rounds),
    the backward one update reusing its plan (1 round); no-grad forwards
    look up only."""
    ec = ht.EmbeddingCollection(ctx, mixed_configs())
    keys = ec.feature_names()
    for step in range(3):
        kjt, _ = mixed_batch(step, keys, weighted=step == 1)
        out = ec(kjt)
        sum(v.sum() for v in out.values()).backward()
        st = ec.collection_stats()
        assert (st["lookups"], st["updates"], st["reused_plans"], st["rounds"]) == \
            (step + 1, step + 1, step + 1, 4 * (step + 1)), st
    with torch.no_grad():
        ec(mixed_batch(5, keys, False)[0])
    st = ec.collection_stats()
    assert (st["lookups"], st["updates"], st["rounds"]) == (4, 3, 15), st
    # The pooled matrix is one tensor; features are its column slices (also
    # through the data-parallel wrapper).
    for out in (ec(mixed_batch(6, keys, False)[0]),
                ht.DistributedDataParallel(ec, ctx)(mixed_batch(7, keys, False)[0])):
        assert isinstance(out, ht.EmbeddingOutput)
        for f, (col, dim) in out.columns.items():
            assert out[f].data_ptr() == out.pooled[:, col:col + dim].data_ptr()
        assert out.pooled.shape == (3, 3 + 3 + 2 + 4)  # s1, s2 (one table), dyn, q
        sum(v.sum() for v in out.values()).backward()


def test_no_grad_forward_does_not_update(ctx):
    ec = ht.EmbeddingCollection(ctx, [ht.TableConfig("t", 2, num_rows=4, initializer="constant",
                                                     init_a=1.0, learning_rate=1.0)])
    kjt = ht.KeyedJaggedTensor(["t"], i64([0, 1]), lengths=i64([1, 1]))
    with torch.no_grad():
        out = ec(kjt)["t"]
    assert not out.requires_grad and out.tolist() == [[1, 1], [1, 1]]
    assert table_weights(ec.tables["t"], 4).tolist() == [[1, 1]] * 4
    assert ec.state_dict() == {} and list(ec.parameters()) == []


def test_dynamic_table_takes_any_id(ctx):
    ec = ht.EmbeddingCollection(ctx, [ht.TableConfig("dyn", 2, pooling="mean", initializer="constant",
                                                     init_a=2.0)])
    kjt = ht.KeyedJaggedTensor(["dyn"], i64([2 ** 62, -5, 123456789]), lengths=i64([2, 1]))
    assert ec(kjt)["dyn"].tolist() == [[2, 2], [2, 2]]


def test_jagged_input_is_validated(ctx):
    ec = ht.EmbeddingCollection(ctx, [ht.TableConfig("t", 2, num_rows=10)])
    cases = [
        (lambda: ht.KeyedJaggedTensor(["t"], i64([1, 2, 3]), offsets=i64([0, 2, 1, 3])),
         hb.HbValueError, "offsets: not monotone at entry 2"),
        (lambda: ht.KeyedJaggedTensor(["t"], i64([1, 2, 3]), offsets=i64([0, 2])),
         hb.HbValueError, "offsets: must run from 0 to len"),
        (lambda: ht.KeyedJaggedTensor(["t"], i64([1, 2, 3]), lengths=i64([2, 2])),
         hb.HbValueError, "lengths: they sum to 4, values has 3"),
        (lambda: ht.KeyedJaggedTensor(["t"], i64([1, 2]), lengths=i64([3, -1])),
         hb.HbValueError, "lengths: entry 1 is negative"),
        (lambda: ht.KeyedJaggedTensor(["t"], torch.tensor([1, 2], dtype=torch.int32), lengths=i64([2])),
         hb.HbTypeError, r"values: expected dtype torch.int64, got torch.int32 \(pass x.to\(torch.int64\)\)"),
        (lambda: ht.KeyedJaggedTensor(["t"], [1, 2], lengths=i64([2])), hb.HbTypeError,
         "values: expected a torch.Tensor"),
        (lambda: ht.KeyedJaggedTensor(["t"], i64([1, 2, 3, 4])[::2], lengths=i64([2])), hb.HbValueError,
         "values: the tensor is not contiguous"),
        (lambda: ht.KeyedJaggedTensor(["t"], i64([1, 2]), lengths=i64([2]), weights=torch.ones(2)[:1]),
         hb.HbValueError, "weights: 1 entries, values has 2"),
        (lambda: ht.KeyedJaggedTensor(["t", "u"], i64([1, 2]), lengths=i64([2])), hb.HbValueError,
         "lengths: 1 entries do not split into 2 features"),
        (lambda: ht.KeyedJaggedTensor(["t"], i64([1]), lengths=i64([1]), weights=torch.ones(1, dtype=torch.float64)),
         hb.HbTypeError, "weights: expected dtype torch.float32"),
        (lambda: ec(ht.KeyedJaggedTensor(["t"], i64([3, 10]), lengths=i64([1, 1]))), hb.HbValueError,
         r"features\['t'\]: id 10 is out of range for table 't' \(num_rows 10\)"),
        (lambda: ec(ht.KeyedJaggedTensor(["t"], i64([-1]), lengths=i64([1]))), hb.HbValueError,
         "id -1 is out of range"),
        (lambda: ec(ht.KeyedJaggedTensor(["x"], i64([1]), lengths=i64([1]))), hb.HbValueError,
         r"unknown feature\(s\) \['x'\]"),
        (lambda: ec({"t": i64([1])}), hb.HbTypeError, "expected an hb.torch.KeyedJaggedTensor"),
        (lambda: ht.TableConfig("t", 2, pooling="max"), hb.HbValueError, "pooling 'max' is not one of"),
        (lambda: ht.TableConfig("t", 2, optimizer="rmsprop"), hb.HbValueError, "unknown 'rmsprop'"),
        (lambda: ht.TableConfig("t", 2, momentum=0.9), hb.HbTypeError, "unknown argument"),
    ]
    for call, cls, match in cases:
        with pytest.raises(cls, match=match) as info:
            call()
        assert isinstance(info.value, hb.HbError) and info.value.status == hb.ERR_INVALID_ARGUMENT


def test_jagged_accessors():
    kjt = ht.KeyedJaggedTensor(["a", "b"], i64([1, 2, 3, 4]), lengths=i64([2, 0, 1, 1]),
                               weights=torch.ones(4))
    assert kjt.keys() == ["a", "b"] and kjt.stride() == 2
    assert kjt.offsets().tolist() == [0, 2, 2, 3, 4] and kjt.lengths().tolist() == [2, 0, 1, 1]
    v, lengths, w = kjt["b"]
    assert v.tolist() == [3, 4] and lengths.tolist() == [1, 1] and w.tolist() == [1, 1]
    assert "batch=2" in repr(kjt)


def test_devices_other_than_cpu_and_cuda_are_refused_clearly(ctx):
    with pytest.raises(hb.HbError, match="CPU and CUDA tensors only") as info:
        ht.KeyedJaggedTensor(["t"], torch.zeros(1, dtype=torch.int64, device="meta"), lengths=i64([1]))
    assert info.value.status == hb.ERR_UNSUPPORTED
    with pytest.raises(hb.HbError, match="CPU and CUDA tensors only"):
        ht.all_reduce(ctx, torch.zeros(2, device="meta"))


def test_table_device_is_checked(ctx):
    for bad in ("gpu", "cuda:x", 0):
        with pytest.raises(hb.HbValueError, match="pass 'cpu', 'cuda' or 'cuda:N'"):
            ht.TableConfig("t", 2, device=bad)
    assert ht.TableConfig("t", 2, device=torch.device("cuda", 1)).device == "cuda:1"
    with pytest.raises(hb.HbValueError, match="share one device"):
        ht.EmbeddingCollection(ctx, [ht.TableConfig("a", 2, device="cpu"), ht.TableConfig("b", 2, device="cuda:0")])
    ec = ht.EmbeddingCollection(ctx, [ht.TableConfig("c", 2, num_rows=4)])
    assert ec.device == torch.device("cpu")
    if ctx.num_gpus <= 0:  # no CUDA: a GPU table is refused by libhb, not faked
        with pytest.raises(hb.HbError) as info:
            ht.EmbeddingCollection(ctx, [ht.TableConfig("d", 2, num_rows=4, device="cuda:0")])
        assert info.value.status == hb.ERR_UNSUPPORTED


def test_table_placement_is_checked(ctx):
    """placement reaches the library (a job without ps tasks refuses a ps
    table); bad values and mixed placements are refused here, saying why.
    torch_mp_check.py --placement ps trains ps tables under hbrun --ps."""
    assert ht.TableConfig("t", 2).placement == "workers"
    assert ht.TableConfig("t", 2, placement=hb.PLACEMENT_PS).placement == "ps"
    for bad in ("server", 7):
        with pytest.raises(hb.HbValueError, match="placement"):
            ht.TableConfig("t", 2, placement=bad)
    with pytest.raises(hb.HbValueError, match="share one placement"):
        ht.EmbeddingCollection(ctx, [ht.TableConfig("a", 2), ht.TableConfig("b", 2, placement="ps")])
    with pytest.raises(hb.HbError) as info:
        ht.EmbeddingCollection(ctx, [ht.TableConfig("p", 2, num_rows=4, placement="ps")])
    assert info.value.status == hb.ERR_INVALID_ARGUMENT and "no ps tasks" in info.value.message


# ---- CUDA (run where torch and hb see a GPU; skipped with the reason otherwise) --------

def cuda_or_skip(ctx):
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device (Debian's python3-torch is CPU-only): CUDA paths not run")
    if ctx.num_gpus <= 0:
        pytest.skip("hb sees no CUDA device (%s)" % hb.build_info())
    return torch.device("cuda", int(ctx.device[5:]) if ctx.device.startswith("cuda:") else 0)


def gpu_table_weights(table, n, dev):
    out = torch.empty((n, table.dim), dtype=torch.float32, device=dev)
    return table.lookup(torch.arange(n, device=dev), out=out)


@pytest.mark.parametrize("pooling", ["sum", "mean", "sqrtn", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_cuda_collection_equals_plain_torch(ctx, pooling, weighted):
    dev = cuda_or_skip(ctx)
    rows, dim, lr = 12, 3, 1.0
    ec = ht.EmbeddingCollection(ctx, [ht.TableConfig("t", dim, num_rows=rows, pooling=pooling, features=["f"],
                                                     initializer="normal", init_b=0.5, seed=7,
                                                     optimizer="sgd", learning_rate=lr, device="cuda")])
    assert ec.device == dev
    kjt = jagged(weighted=weighted)
    with pytest.raises(hb.HbDeviceError, match="features.to"):
        ec(kjt)
    weight = gpu_table_weights(ec.tables["t"], rows, dev).cpu().requires_grad_()
    out = ec(kjt.to(dev))["f"]
    assert out.device == dev and out.dtype == torch.float32 and out.requires_grad
    if pooling == "none":
        want = F.embedding(kjt.values(), weight)
    else:
        want = reference_pool(weight, pooling, weighted)
    torch.testing.assert_close(out.cpu(), want, rtol=1e-6, atol=1e-6)
    upstream = torch.arange(want.numel(), dtype=torch.float32).reshape(want.shape) - 4
    (out * upstream.to(dev)).sum().backward()
    (want * upstream).sum().backward()
    after = gpu_table_weights(ec.tables["t"], rows, dev).cpu()
    torch.testing.assert_close(after, weight.detach() - lr * weight.grad, rtol=1e-6, atol=1e-6)


def check_equals_cpu_module(mod, ref, dev):
    """mod (tables on dev) against ref, the CPU module over tables of the
    same configs: outputs, the gradients of what consumes them and every
    table after each step bit for bit (mixed tables, dims, poolings,
    optimizers, a dynamic table; weighted and not, keys reordered, a
    feature missing), and collection_stats() counts the same calls and
    rounds."""
    runs = [(["s1", "s2", "dyn", "q", "seq"], False), (["s1", "s2", "dyn", "q", "seq"], True),
            (["seq", "q", "s1", "dyn"], True), (["dyn", "s2", "s1", "q", "seq"], False)]
    seen = {n: {0} for n, _, _, _, _, _ in MIXED}
    for step, (keys, weighted) in enumerate(runs):
        kjt, bags = mixed_batch(step, keys, weighted)
        out_m, out_r = mod(kjt.to(dev)), ref(kjt)
        assert list(out_m) == list(out_r) and out_m.pooled.device == dev
        loss_m, loss_r, consumers = 0, 0, []
        for k in out_r:
            assert out_m[k].device == dev and out_m[k].dtype == torch.float32 and out_m[k].requires_grad
            assert torch.equal(out_m[k].cpu(), out_r[k]), (step, k)
            up = torch.randn(out_r[k].shape, generator=torch.Generator().manual_seed(step * 10 + len(k)))
            p_m, p_r = up.to(dev, copy=True).requires_grad_(), up.requires_grad_()
            loss_m = loss_m + (out_m[k] * p_m).sum()
            loss_r = loss_r + (out_r[k] * p_r).sum()
            consumers.append((k, p_m, p_r))
        loss_m.backward()
        loss_r.backward()
        for k, p_m, p_r in consumers:  # d loss / d p = the output, exactly
            assert torch.equal(p_m.grad.cpu(), p_r.grad), (step, k)
        for name, _, _, fs, _, _ in MIXED:
            seen[name].update(i for f in fs for bag in bags.get(f, []) for i in bag)
            ids = np.array(sorted(seen[name]), np.int64)
            table = mod.tables[name]
            if table.device >= 0:
                rows = torch.empty((ids.size, table.dim), dtype=torch.float32, device=dev)
                rows = table.lookup(torch.from_numpy(ids).to(dev), out=rows).cpu().numpy()
            else:
                rows = table.lookup(ids)
            assert np.array_equal(rows, ref.tables[name].lookup(ids)), (step, name)
    st_m, st_r = mod.collection_stats(), ref.collection_stats()
    if dev.type == "cuda":  # a device collection's owner_unique counts the ids before the owners'
        del st_m["owner_unique"], st_r["owner_unique"]  # dedup (docs/embedding-collections.md)
    assert st_m == st_r, (st_m, st_r)
    assert st_m["lookups"] == st_m["updates"] == st_m["reused_plans"] == len(runs), st_m


def test_gpu_collection_path_emulated_on_host_tables(ctx, monkeypatch):
    """hb.torch's path for GPU tables without a GPU: tensors (not numpy
    views) handed to one collection call per direction, offsets copied to
    the tables' device, the unpooled rows split by the host offsets. The
    module's collections are host ones marked as GPU collections, and hb is
    shown CPU tensors as CUDA arrays over their host memory, so the library
    reads them as the host memory they are. A numpy array or a missing
    array would be refused (a GPU collection), so this checks the routing."""
    # (hb/_arrays.py: the argument checks of the handles look them up there)
    real_is, real_array = hb._arrays._is_device_array, hb._arrays._device_array
    handed = []

    def device_array(x, param, dtype=None, writable=False):
        if not isinstance(x, torch.Tensor):
            return real_array(x, param, dtype, writable)
        assert x.is_contiguous() and x.dtype == {np.dtype(np.int64): torch.int64,
                                                 np.dtype(np.float32): torch.float32}[np.dtype(dtype)], param
        handed.append(param)
        return hb._DeviceArray(x, x.data_ptr(), tuple(x.shape), np.dtype(dtype))

    monkeypatch.setattr(hb._arrays, "_is_device_array", lambda x: isinstance(x, torch.Tensor) or real_is(x))
    monkeypatch.setattr(hb._arrays, "_device_array", device_array)
    mod = ht.EmbeddingCollection(ctx, mixed_configs())
    mod._on_gpu = True
    for c in mod._colls.values():
        c.device = 0
    twin_ctx = hb.Context(rank=0, world_size=1)  # same names, so the same initial rows
    ref = ht.EmbeddingCollection(twin_ctx, mixed_configs())
    check_equals_cpu_module(mod, ref, torch.device("cpu"))
    assert {"values", "offsets", "weights", "out", "unpooled", "grad_out", "grad_unpooled"} <= set(handed)
    for c in mod._colls.values():
        c.device = -1
    mod.close(), ref.close(), twin_ctx.close()


def test_cuda_collection_equals_cpu_collection_bit_for_bit(ctx):
    """GPU tables run by one device collection per direction equal the CPU
    module bit for bit (check_equals_cpu_module)."""
    dev = cuda_or_skip(ctx)
    gpu = ht.EmbeddingCollection(ctx, [ht.TableConfig(n, d, num_rows=r, features=fs, pooling=p,
                                                      initializer="normal", init_b=0.5, seed=11, device="cuda", **o)
                                       for n, d, r, fs, p, o in MIXED])
    assert gpu.device == dev and all(c.device == dev.index for c in gpu._colls.values())
    twin_ctx = hb.Context(rank=0, world_size=1)  # same names, so the same initial rows
    cpu = ht.EmbeddingCollection(twin_ctx, mixed_configs())
    check_equals_cpu_module(gpu, cpu, dev)
    gpu.close(), cpu.close(), twin_ctx.close()


def test_cuda_dense_sync_and_all_reduce(ctx):
    dev = cuda_or_skip(ctx)
    model = torch.nn.Linear(4, 2).to(dev)
    ht.broadcast_parameters(ctx, model)
    ddp = ht.DistributedDataParallel(model, ctx)
    ddp(torch.ones(3, 4, device=dev)).sum().backward()
    want = torch.ones(3, 4).sum(0).expand(2, 4)
    assert torch.equal(model.weight.grad.cpu(), want)  # averaged over one rank: unchanged
    x = torch.arange(5, dtype=torch.float32, device=dev)
    assert ht.all_reduce(ctx, x) is x
    assert x.cpu().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    out = torch.empty_like(x)
    assert ctx.allreduce(x, recv=out) is out  # the plain binding takes torch CUDA tensors too
    torch.cuda.current_stream(dev).synchronize()
    assert torch.equal(out, x)


class Model(torch.nn.Module):
    def __init__(self, ctx, seed=0, name="m_emb"):
        super().__init__()
        torch.manual_seed(seed)
        self.name = name
        self.sparse = ht.EmbeddingCollection(ctx, [ht.TableConfig(
            name, 4, features=["m_emb"], num_rows=8, initializer="normal", init_b=0.3, optimizer="adagrad",
            learning_rate=0.1)])
        self.mlp = torch.nn.Sequential(torch.nn.Linear(5, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))

    def forward(self, kjt, dense):
        return self.mlp(torch.cat([self.sparse(kjt)["m_emb"], dense], 1)).squeeze(1)


def test_ddp_world_of_one_trains_and_checkpoints(ctx, tmp_path):
    model = Model(ctx)
    ddp = ht.DistributedDataParallel(model, ctx)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    kjt = ht.KeyedJaggedTensor(["m_emb"], i64([1, 2, 3]), lengths=i64([1, 2]))
    dense, y = torch.ones(2, 1), torch.tensor([1.0, 0.0])
    before = [p.detach().clone() for p in model.parameters()]
    loss = F.binary_cross_entropy_with_logits(ddp(kjt, dense), y)
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())
    opt.step()
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    ht.save(tmp_path / "ck", ddp, ctx, opt)
    want_rows = model.sparse.tables["m_emb"].lookup(np.arange(8, dtype=np.int64))
    want_state = {k: v.clone() for k, v in model.state_dict().items()}
    # Train on, then load: back to the checkpoint.
    for _ in range(2):
        opt.zero_grad()
        F.binary_cross_entropy_with_logits(ddp(kjt, dense), y).backward()
        opt.step()
    assert not np.array_equal(model.sparse.tables["m_emb"].lookup(np.arange(8, dtype=np.int64)), want_rows)
    ht.load(tmp_path / "ck", model, ctx, opt)
    assert np.array_equal(model.sparse.tables["m_emb"].lookup(np.arange(8, dtype=np.int64)), want_rows)
    assert all(torch.equal(v, want_state[k]) for k, v in model.state_dict().items())
    with pytest.raises(hb.HbError, match="no hb.torch checkpoint"):
        ht.load(tmp_path / "nothing", model, ctx)


def test_gradients_sync_once_per_backward_and_by_hand(ctx):
    calls = []
    model = Model(ctx)
    ddp = ht.DistributedDataParallel(model, ctx)
    ddp.sync_gradients = lambda: calls.append(1)  # counts the queued syncs
    kjt = ht.KeyedJaggedTensor(["m_emb"], i64([1, 2]), lengths=i64([1, 1]))
    out = ddp(kjt, torch.ones(2, 1))
    (out.sum() * 2).backward()
    assert calls == [1]
    with torch.no_grad():
        assert not ddp(kjt, torch.ones(2, 1)).requires_grad
    with ddp.no_sync():
        ddp(kjt, torch.ones(2, 1)).sum().backward()
    assert calls == [1]
    ddp(kjt, torch.ones(2, 1)).sum().backward()
    assert calls == [1, 1]
    manual = ht.DistributedDataParallel(Model(ctx, seed=1, name="m2"), ctx, auto_sync=False)
    manual(kjt, torch.ones(2, 1)).sum().backward()
    manual.sync_gradients()  # a world of one: averaging changes nothing
    ht.allreduce_gradients(ctx, [torch.zeros(2, requires_grad=True)])


def test_broadcast_parameters_handles_every_dtype(ctx):
    tensors = [torch.arange(6, dtype=torch.float32).reshape(2, 3).t(), torch.tensor([True, False]),
               torch.tensor([1.5], dtype=torch.bfloat16), torch.zeros(0), torch.tensor([7], dtype=torch.int64)]
    before = [t.clone() for t in tensors]
    ht.broadcast_parameters(ctx, tensors)
    assert all(torch.equal(a, b) for a, b in zip(tensors, before))


def test_metric_data_sync_and_all_reduce_take_tensors(ctx):
    labels = torch.tensor([1.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    logits = torch.tensor([[2.0], [-1.0], [-0.5], [0.5]], requires_grad=True)
    with ht.Metric(hb.METRIC_AUC_EXACT, ctx) as m:
        m.update(labels, torch.sigmoid(logits))
        assert m.result() == 0.75
    assert ht.data_sync(ctx, torch.zeros(3)) == (True, False)
    assert ht.data_sync(ctx, None, drop_remainder=True)[0] is False
    t = torch.tensor([1.0, 2.0])
    assert ht.all_reduce(ctx, t, op=hb.MAX) is t and t.tolist() == [1.0, 2.0]
    with pytest.raises(hb.HbValueError, match="not contiguous"):
        ht.all_reduce(ctx, torch.zeros(4)[::2])


def test_every_public_callable_of_hb_torch_has_a_docstring():
    missing = [name for name, obj in _public_callables(ht) if not (getattr(obj, "__doc__", None) or "").strip()]
    assert not missing, missing


def test_config_descriptions_name_what_differs():
    """What the construction check compares and how it words a difference
    (the multi-rank refusal itself: torch_mp_check.py --mode mismatch)."""
    a = ht._table_fields(1, ht.TableConfig("tag", 3, pooling="sum", optimizer="adagrad"))
    b = ht._table_fields(1, ht.TableConfig("tag", 3, pooling="sqrtn", optimizer="adagrad",
                                           initial_accumulator=0.1))  # hb's default, passed
    assert ht._differences([a, b, a]) == "table 1 ('tag') pooling: 'sum' (ranks 0,2) vs 'sqrtn' (rank 1)"
    assert dict((k, v) for k, _, v in a)["tables[1].optimizer"] == "'adagrad'"
    w = [ht._module_fields(torch.nn.Linear(3, 2), True), ht._module_fields(torch.nn.Linear(2, 3), True)]
    d = ht._differences(w)
    assert "parameter 0 ('weight') shape: (2, 3) (rank 0) vs (3, 2) (rank 1)" in d, d
    assert "parameter 1 ('bias') shape: (2,) (rank 0) vs (3,) (rank 1)" in d, d
    assert ht._rank_list([0, 1, 2, 3, 5]) == "ranks 0-3,5" and ht._rank_list([4]) == "rank 4"
