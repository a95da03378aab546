"""Single-process tests of the Python binding (ctest python_binding)."""

import json
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hb  # noqa: E402
import hb.run  # noqa: E402
import hb.train  # noqa: E402
from reference import exact_auc, samples  # noqa: E402


# ---- Library-wide calls and errors -------------------------------------------------

def test_version_and_constants():
    assert hb.version_number() == hb.VERSION_NUMBER
    assert hb.build_info().startswith("hb %s" % hb.__version__)
    assert hb.status_name(hb.ERR_TIMEOUT) == "HB_ERR_TIMEOUT"
    assert hb.status_name(12345) == "HB_ERR_UNKNOWN"
    assert [hb.dtype_size(d) for d in (hb.FLOAT32, hb.FLOAT64, hb.FLOAT16, hb.BFLOAT16,
                                       hb.INT32, hb.INT64, hb.UINT8, 99)] == [4, 8, 2, 2, 4, 8, 1, 0]


def test_error_carries_status_name_and_message():
    with pytest.raises(hb.HbError) as info:
        hb.shard_range(10, 0, 0)
    e = info.value
    assert e.status == hb.ERR_INVALID_ARGUMENT and e.name == "HB_ERR_INVALID_ARGUMENT"
    assert e.message and e.message == hb.last_error()
    assert str(e).startswith("HB_ERR_INVALID_ARGUMENT: ")


def test_concurrent_errors_keep_their_message():
    """The GIL is released around calls; each thread's HbError still holds
    the message of its own failing call."""
    import threading
    bad = []

    def work(t):
        for i in range(200):
            name = "no_such_option_%d_%d" % (t, i)
            try:
                hb.get_option(name)
                bad.append(name + ": accepted")
            except hb.HbError as e:
                if name not in e.message:
                    bad.append("%s: %s" % (name, e.message))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not bad, bad[:3]


def test_shard_range_and_placement():
    ranges = [hb.shard_range(10, 3, s) for s in range(3)]
    assert ranges[0][0] == 0 and ranges[-1][1] == 10
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert sorted(e - b for b, e in ranges) == [3, 3, 4]
    with pytest.raises(hb.HbError):
        hb.shard_range(2, 3, 2, strict=True)
    p = hb.placement_replication(4, 0, 3)
    assert isinstance(p.build_ensemble, bool) and p.build_subnetwork.shape == (3,)
    assert p.build_subnetwork.all()  # replication: every worker builds every subnetwork
    rr = [hb.placement_round_robin(4, w, 3) for w in range(4)]
    assert rr[0].build_ensemble


def test_tf_config_build():
    doc = json.loads(hb.tf_config_build("worker", 0, ["h0:1", "h1:2", "h2:3"], ["p0:4"]))
    assert doc["cluster"]["chief"] == ["h0:1"]
    assert doc["cluster"]["worker"] == ["h1:2", "h2:3"]
    assert doc["cluster"]["ps"] == ["p0:4"]
    assert doc["task"] == {"type": "worker", "index": 0}
    with pytest.raises(TypeError, match=r"worker_hosts\[1\]"):
        hb.tf_config_build("worker", 0, ["h0:1", 2])
    with pytest.raises(hb.HbError):
        hb.tf_config_build("nobody", 0, ["h0:1"])


def test_options():
    opts = hb.options()
    names = [o.name for o in opts]
    assert "timeout_ms" in names
    assert hb.get_option("timeout_ms") == opts[names.index("timeout_ms")].default
    with pytest.raises(hb.HbError) as info:
        hb.get_option("no_such_option")
    assert "no_such_option" in info.value.message


# ---- The typemaps themselves (no libhb call is reached) ----------------------------

def test_typemaps_reject_bad_buffers():
    f = np.zeros(4, np.float32)
    with pytest.raises(TypeError, match="labels: expected a numpy array, got list"):
        hb.capi.hb_metric_update(0, [0.0], f, None, 1)
    with pytest.raises(TypeError, match="preds: expected float32"):
        hb.capi.hb_metric_update(0, f, np.zeros(4, np.float64), None, 4)
    with pytest.raises(ValueError, match="not C-contiguous"):
        hb.capi.hb_metric_update(0, np.zeros(8, np.float32)[::2], f, None, 4)
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="recv: the array is read-only"):
        hb.capi.hb_allreduce(0, f, ro, 4, hb.FLOAT32, hb.SUM)


# ---- Local metrics (no context) -----------------------------------------------------

def test_local_auc_matches_reference():
    labels, preds, weights = samples(500)
    with hb.Metric(hb.METRIC_AUC_EXACT) as m:
        m.update(labels[:200], preds[:200], weights[:200])
        m.update(labels[200:], preds[200:], weights[200:])
        assert abs(m.result() - exact_auc(labels, preds, weights)) < 1e-12
        m.reset()
        assert m.result() == 0.0 and m.flags & hb.METRIC_FLAG_EMPTY


def test_local_accuracy_and_mean():
    labels = np.array([1, 0, 1, 0], np.float32)
    preds = np.array([0.9, 0.2, 0.3, 0.6], np.float32)
    with hb.Metric(hb.METRIC_ACCURACY, threshold=0.5) as acc:
        acc.update(labels, preds)
        assert acc.result() == 0.5
    with hb.Metric(hb.METRIC_MEAN) as mean:
        mean.update(labels, preds, np.array([1, 1, 1, 5], np.float32))
        assert abs(mean.result() - (0.9 + 0.2 + 0.3 + 3.0) / 8) < 1e-7


def test_metric_argument_errors():
    m = hb.Metric(hb.METRIC_AUC)
    with pytest.raises(ValueError, match="preds: 3 elements, labels has 4"):
        m.update(np.zeros(4, np.float32), np.zeros(3, np.float32))
    with pytest.raises(TypeError, match="labels: expected dtype float32"):
        m.update(np.zeros(4, np.float64), np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="unknown metric config field 'nope'"):
        hb.Metric(hb.METRIC_AUC, nope=1)
    with pytest.raises(hb.HbError) as info:
        hb.Metric(kind=99)
    assert info.value.status == hb.ERR_INVALID_ARGUMENT
    m.close()
    m.close()  # twice is fine
    with pytest.raises(ValueError, match="Metric is closed"):
        m.result()


def test_train_evaluates_every_n_steps():
    labels, preds, _ = samples(64)
    seen = []
    with hb.Metric(hb.METRIC_AUC_EXACT) as auc:
        history = hb.train.train(
            lambda step, batch: seen.append(batch), data=range(10), eval_every=4,
            eval_fn=lambda step, ms: ms["auc"].update(labels, preds),
            metrics={"auc": auc})
    assert seen == list(range(10))
    assert [r.step for r in history] == [4, 8, 10]
    assert all(abs(r.values["auc"] - exact_auc(labels, preds)) < 1e-12 for r in history)


def test_run_module_builds_hbrun_command():
    assert hb.run.command(["-n", "2", "--", "x.py", "a"]) == ["-n", "2", "--", sys.executable, "x.py", "a"]
    assert hb.run.command(["-n", "2", "--", "prog"]) == ["-n", "2", "--", "prog"]
    assert hb.run.hbrun_path() is not None


# ---- A world of one --------------------------------------------------------------------

@pytest.fixture
def ctx():
    with hb.Context(rank=0, world_size=1) as c:
        yield c


def test_context_world_of_one(ctx):
    assert (ctx.rank, ctx.world_size, ctx.is_chief) == (0, 1, True)
    assert ctx.device == "cpu:0"
    ctx.set_option("timeout_ms", 1234)
    assert ctx.get_option("timeout_ms") == "1234"
    with pytest.raises(hb.HbError) as info:
        ctx.set_option("timeout_ms", "soon")
    assert info.value.status == hb.ERR_CONFIG and "timeout_ms" in info.value.message
    ctx.barrier()


def test_collectives_world_of_one(ctx):
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    assert np.array_equal(ctx.allreduce(x), x)
    y = x.copy()
    assert ctx.allreduce(y, recv=y, op=hb.AVG) is y and np.array_equal(y, x)
    assert np.array_equal(ctx.allgather(x.ravel()), x.reshape(1, 6))
    assert np.array_equal(ctx.alltoall(x.ravel()), x.ravel())
    assert np.array_equal(ctx.reduce_scatter(x.ravel()), x.ravel())
    v = ctx.allgatherv(np.array([1, 2, 3], np.int32), [3])
    assert v.tolist() == [1, 2, 3]
    w = ctx.alltoallv(np.array([5, 6], np.int64), [2], [2])
    assert w.tolist() == [5, 6]
    b = np.array([9, 8], np.uint8)
    assert ctx.broadcast(b, root=0).tolist() == [9, 8]
    arrays = [np.ones(3, np.float32), np.full(5, 2, np.float32)]
    ctx.allreduce_many(arrays)
    assert arrays[1].tolist() == [2] * 5
    bf = np.array([0x3F80], np.uint16)  # bfloat16 1.0
    assert ctx.allreduce(bf, dtype=hb.BFLOAT16).tolist() == [0x3F80]
    assert ctx.data_sync(True) == (True, False)
    assert ctx.data_sync(False, drop_remainder=True)[0] is False


def test_allreduce_start_world_of_one(ctx):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    req = ctx.allreduce_start(x)
    out = req.wait()
    assert req.done and out.shape == x.shape and np.array_equal(out, x)
    with pytest.raises(hb.HbValueError, match="already waited"):
        req.wait()
    ctx.allreduce_start(x, recv=x, op=hb.MAX)  # dropped: its finalizer waits
    with pytest.raises(TypeError, match="send: expected a numpy array"):
        ctx.allreduce_start([1.0, 2.0])


def test_collective_argument_errors(ctx):
    with pytest.raises(TypeError, match="send: expected a numpy array, got list"):
        ctx.allreduce([1.0, 2.0])
    with pytest.raises(TypeError, match="numpy dtype complex128 has no hb dtype"):
        ctx.allreduce(np.zeros(2, np.complex128))
    with pytest.raises(ValueError, match="recv: needs 4 elements, the array has 2"):
        ctx.allreduce(np.zeros(4, np.float32), recv=np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="not C-contiguous"):
        ctx.allreduce(np.zeros((4, 4), np.float32)[:, 1])
    with pytest.raises(ValueError, match="recv_counts: expected 1 entries"):
        ctx.allgatherv(np.zeros(2, np.float32), [1, 1])
    with pytest.raises(hb.HbError) as info:
        ctx.allreduce(np.zeros(2, np.float32), op=77)
    assert info.value.status == hb.ERR_INVALID_ARGUMENT and "77" in info.value.message


def test_embedding_on_ps_needs_ps_tasks(ctx):
    """placement (hb_embedding_config) reaches the library: a table on the
    ps tasks of a job that has none is refused, saying why."""
    with pytest.raises(hb.HbError) as info:
        hb.Embedding(ctx, "on_ps", 4, num_rows=10, placement=1)
    assert info.value.status == hb.ERR_INVALID_ARGUMENT
    assert "no ps tasks" in info.value.message


def test_ps_calls_without_ps_tasks(ctx):
    """The ps calls reach the library and refuse a job without ps tasks
    (tests/ps_check.py runs them in a real ps job under hbrun --ps)."""
    assert ctx.num_ps == 0
    for call in (ctx.serve, ctx.ps_position, ctx.ps_stats, lambda: ctx.ps_set_position(b"x"),
                 ctx.ps_split_next, ctx.ps_split_try, lambda: ctx.ps_split_commit(0, 1)):
        with pytest.raises(hb.HbError) as info:
            call()
        assert info.value.status == hb.ERR_INVALID_ARGUMENT, info.value
    with pytest.raises(hb.HbError) as info:
        hb.PsDense(ctx, "dense", 4, optimizer=hb.OPT_SGD)
    assert info.value.status == hb.ERR_INVALID_ARGUMENT and "no ps tasks" in info.value.message
    with pytest.raises(hb.HbValueError, match="init: needs 4 elements"):
        hb.PsDense(ctx, "dense", 4, init=np.zeros(3, np.float32))
    with pytest.raises(hb.HbTypeError, match="unknown ps dense config field 'lr'"):
        hb.PsDense(ctx, "dense", 4, lr=0.1)
    with pytest.raises(hb.HbTypeError, match="position: expected bytes"):
        ctx.ps_set_position(3)


def test_embedding_world_of_one(ctx, tmp_path):
    with hb.Embedding(ctx, "t", 3, optimizer=hb.OPT_SGD, learning_rate=0.5) as emb:
        assert emb.dim == 3
        ids = np.array([4, 2, 4], np.int64)
        assert not emb.lookup(ids).any()  # zeros initializer
        emb.apply_gradients(ids, np.ones((3, 3), np.float32))
        rows = emb.lookup(np.array([4, 2], np.int64))
        assert rows.tolist() == [[-1.0] * 3, [-0.5] * 3]  # duplicate 4: summed
        with pytest.raises(ValueError, match="grads: needs 3 x 3 elements"):
            emb.apply_gradients(ids, np.ones(3, np.float32))
        with pytest.raises(TypeError, match="ids: expected dtype int64"):
            emb.lookup(np.array([1], np.int32))
        path = str(tmp_path / "t.hbe")
        emb.export(path)
    with hb.Embedding.open(path) as serving:
        got = serving.lookup(np.array([2, 99], np.int64))
        assert got.tolist() == [[-0.5] * 3, [0.0] * 3] and serving.misses == 1
    with pytest.raises(hb.HbError) as info:
        hb.Embedding.open(str(tmp_path / "missing.hbe"))
    assert "missing.hbe" in info.value.message


def test_embedding_lifecycle_admission_and_capacity(ctx, tmp_path):
    # min_count 2: an id reads default_value and its gradients are dropped
    # until its second update step; max_rows 2: the least recently updated
    # rows go (ties: the smaller id).
    life = dict(admission=hb.ADMIT_COUNT, min_count=2, default_value=0.5,
                max_rows=2, score=hb.SCORE_LRU)
    with hb.Embedding(ctx, "life", 2, optimizer=hb.OPT_SGD, learning_rate=1.0,
                      lifecycle=life) as emb:
        g = np.ones((1, 2), np.float32)
        for _ in range(2):  # counted at step 1, admitted at step 2
            assert emb.lookup(np.array([7], np.int64)).tolist() == [[0.5] * 2]
            emb.apply_gradients(np.array([7], np.int64), g)
        assert emb.lookup(np.array([7], np.int64)).tolist() == [[-1.0] * 2]
        for i in (1, 2, 3):  # 1 .. 3 admitted at their second step
            emb.apply_gradients(np.array([i], np.int64), g)
            emb.apply_gradients(np.array([i], np.int64), g)
        st = emb.lifecycle_stats()
        assert st["rows"] == 2 and st["evicted_capacity"] == 2
        assert st["admitted"] == 4 and st["dropped"] == 4 and st["step"] == 8
        assert emb.lookup(np.array([7], np.int64)).tolist() == [[0.5] * 2]  # evicted
        emb.save(str(tmp_path / "ckpt"))
    with pytest.raises(hb.HbTypeError, match="unknown lifecycle field 'max_row'"):
        hb.Embedding(ctx, "bad", 2, lifecycle=dict(max_row=3))
    with pytest.raises(hb.HbError) as info:
        hb.Embedding(ctx, "static", 2, num_rows=10, lifecycle={})
    assert "dynamic" in info.value.message
    with hb.Embedding(ctx, "plain", 2) as emb, pytest.raises(hb.HbError) as info:
        emb.lifecycle_stats()
    assert "no lifecycle" in info.value.message


def test_closing_context_closes_children():
    c = hb.Context(rank=0, world_size=1)
    m = hb.Metric(hb.METRIC_MEAN, c)
    c.close()
    assert m.closed and c.closed
    with pytest.raises(ValueError, match="Context is closed"):
        c.rank


def test_listeners_around_save_and_load(ctx, tmp_path):
    events = []
    ctx.add_listener(hb.EVENT_BEFORE_SAVE, lambda e, p: events.append((e, p)))
    ctx.add_listener(hb.EVENT_AFTER_LOAD, lambda e, p: events.append((e, p)))
    with pytest.raises(hb.HbError):
        ctx.add_listener(42, print)
    with pytest.raises(TypeError, match="fn: expected a callable"):
        hb.capi.hb_context_add_listener(ctx._handle, hb.EVENT_AFTER_SAVE, 3)
    ckpt = str(tmp_path / "ckpt")
    with hb.Embedding(ctx, "saved", 2, optimizer=hb.OPT_SGD, learning_rate=1.0) as emb:
        ids = np.array([3], np.int64)
        emb.apply_gradients(ids, np.ones((1, 2), np.float32))
        emb.save(ckpt)
        emb.apply_gradients(ids, np.ones((1, 2), np.float32))
        emb.load(ckpt)
        assert emb.lookup(ids).tolist() == [[-1.0, -1.0]]
    assert events == [(hb.EVENT_BEFORE_SAVE, ckpt), (hb.EVENT_AFTER_LOAD, ckpt)]


# ---- One error family; explicit conversion; docstrings ---------------------------------

def test_argument_errors_are_hb_errors(ctx):
    """Every refusal of hb's own is an HbError; the argument ones are also
    the TypeError / ValueError they were before."""
    cases = [
        (lambda: ctx.allreduce([1.0, 2.0]), hb.HbTypeError, "send: expected a numpy array, got list"),
        (lambda: ctx.allreduce(np.zeros((4, 4), np.float32)[:, 1]), hb.HbValueError, "not C-contiguous"),
        (lambda: hb.capi.hb_metric_update(0, [0.0], np.zeros(1, np.float32), None, 1), hb.HbTypeError,
         "labels: expected a numpy array"),
        (lambda: hb.capi.hb_allreduce(0, np.zeros(2, np.float32), np.zeros(4, np.float32)[::2], 2,
                                      hb.FLOAT32, hb.SUM), hb.HbValueError, "recv: the array is not C-contiguous"),
        (lambda: ctx.allreduce_many(np.zeros(3, np.float32)), hb.HbTypeError, "arrays"),
        (lambda: hb.capi.hb_allreduce_many(ctx._handle, 5, hb.FLOAT32, hb.SUM), hb.HbTypeError,
         "bufs: expected a list of numpy arrays, got int"),
        (lambda: hb.tf_config_build("worker", 0, ["h0:1", 2]), hb.HbTypeError, r"worker_hosts\[1\]"),
        (lambda: hb.Metric(hb.METRIC_AUC, nope=1), hb.HbTypeError, "unknown metric config field 'nope'"),
        (lambda: hb.train.train(print, [], 0, print), hb.HbValueError, "eval_every"),
        (lambda: ctx.barrier("soon"), hb.HbTypeError, "hb_context_barrier: "),
        (lambda: hb.shard_range(2 ** 70, 2, 0), hb.HbTypeError, "hb_shard_range: "),
        (lambda: hb.Embedding(ctx, "bad_dim", "8"), hb.HbTypeError, "embedding config field 'dim': '8'"),
        (lambda: hb.Context(rank="zero"), hb.HbTypeError, "context option field 'rank'"),
    ]
    for call, cls, match in cases:
        with pytest.raises(cls, match=match) as info:
            call()
        e = info.value
        assert isinstance(e, hb.HbError) and isinstance(e, hb.HbArgumentError)
        assert isinstance(e, TypeError if cls is hb.HbTypeError else ValueError)
        assert e.status == hb.ERR_INVALID_ARGUMENT and e.name == "HB_ERR_INVALID_ARGUMENT"
    m = hb.Metric(hb.METRIC_MEAN)
    m.close()
    with pytest.raises(hb.HbValueError, match="Metric is closed"):
        m.result()
    import pickle
    e = pickle.loads(pickle.dumps(hb.HbTypeError("x: bad")))
    assert type(e) is hb.HbTypeError and e.message == "x: bad"


def test_refusals_say_what_to_pass(ctx):
    with pytest.raises(hb.HbTypeError, match=r"expected dtype float32, got float64 \(pass x.astype\(np.float32\), "
                                             r"or convert=True"):
        hb.Metric(hb.METRIC_MEAN).update(np.zeros(2), np.zeros(2, np.float32))
    with pytest.raises(hb.HbTypeError, match="pass a C-contiguous numpy array of dtype int64, or convert=True"):
        hb.Embedding(ctx, "refuse", 2).lookup([1, 2])


def test_convert_is_an_explicit_opt_in(ctx):
    # Lists, float64 (numpy's default) and strided views are copied only when asked.
    got = ctx.allreduce([1.0, 2.0], convert=True)
    assert got.dtype == np.float64 and got.tolist() == [1.0, 2.0]
    assert ctx.allreduce(np.arange(8, dtype=np.float32)[::2], convert=True).tolist() == [0, 2, 4, 6]
    assert ctx.allreduce([1, 2], dtype=hb.FLOAT32, convert=True).dtype == np.float32
    assert ctx.allgather([3], convert=True).tolist() == [[3]]
    labels, preds, weights = samples(100)
    with hb.Metric(hb.METRIC_AUC_EXACT) as m:
        m.update(labels.astype(np.float64), preds.tolist(), weights[::1].astype(np.float64), convert=True)
        assert abs(m.result() - exact_auc(labels, preds, weights)) < 1e-12
    with hb.Embedding(ctx, "conv", 2, optimizer=hb.OPT_SGD, learning_rate=1.0) as emb:
        emb.apply_gradients([5, 5], [[1.0, 2.0], [1.0, 2.0]], convert=True)  # float64 lists
        assert emb.lookup(np.array([5], np.int32), convert=True).tolist() == [[-2.0, -4.0]]
    with pytest.raises(hb.HbTypeError, match="send: numpy dtype object has no hb dtype"):
        ctx.allreduce(["a", object()], convert=True)
    # Outputs are written in place: never converted.
    with pytest.raises(hb.HbTypeError, match="recv: expected dtype float32, got float64"):
        ctx.allreduce([1.0], recv=np.zeros(1), dtype=hb.FLOAT32, convert=True)


def _public_callables(module):
    for name in dir(module):
        obj = getattr(module, name)
        if name.startswith("_") or getattr(obj, "__module__", module.__name__) != module.__name__:
            continue
        if callable(obj):
            yield name, obj
            if isinstance(obj, type):
                for attr, member in vars(obj).items():
                    if not attr.startswith("_") and (callable(member) or isinstance(member, property)
                                                     or isinstance(member, (classmethod, staticmethod))):
                        yield "%s.%s" % (name, attr), member


def test_every_public_callable_has_a_docstring():
    modules = [hb, hb.run, hb.train, sys.modules["hb._errors"]]
    missing = [m.__name__ + "." + name for m in modules for name, obj in _public_callables(m)
               if not (getattr(obj, "__doc__", None) or "").strip()]
    assert not missing, missing


def test_import_hb_does_not_import_torch():
    import subprocess
    code = "import sys, hb, hb.run, hb.train; sys.exit(1 if 'torch' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


# ---- Embedding collections -------------------------------------------------------

def _pool_reference(rows, weights, pooling):
    """The documented forward of one bag: (weighted) rows summed in order in
    float32, then / n (mean) or / sqrt(n) (sqrtn); zeros when empty."""
    if len(rows) == 0:
        return np.zeros(rows.shape[1], dtype=np.float32)
    acc = None
    for i in range(len(rows)):
        v = rows[i] if weights is None else np.float32(weights[i]) * rows[i]
        acc = v.copy() if acc is None else (acc + v).astype(np.float32)
    n = np.float32(len(rows))
    if pooling == hb.POOLING_MEAN:
        acc = acc / n
    elif pooling == hb.POOLING_SQRTN:
        acc = acc / np.sqrt(n)
    return acc.astype(np.float32)


def test_collection_matches_single_table_calls(ctx):
    """A collection step equals hb_embedding_lookup + pooling and
    hb_embedding_apply_gradients of the per-id gradients (twin tables)."""
    cfg = dict(num_rows=64, initializer=hb.INIT_NORMAL, init_b=0.3, optimizer=hb.OPT_ADAGRAD,
               learning_rate=0.1)
    a = hb.Embedding(ctx, "ca", 3, **cfg)
    b = hb.Embedding(ctx, "cb", 2, **dict(cfg, num_rows=0))
    # Same names (so the same initial rows) in a second context: names are
    # unique per context.
    ctx2 = hb.Context()
    twin_a = hb.Embedding(ctx2, "ca", 3, **cfg)
    twin_b = hb.Embedding(ctx2, "cb", 2, **dict(cfg, num_rows=0))
    # Two pooling-NONE features: their rows are split in one unpooled array.
    feats = [(a, hb.POOLING_SUM), (b, hb.POOLING_NONE), (b, hb.POOLING_MEAN), (a, hb.POOLING_SQRTN),
             (a, hb.POOLING_NONE)]
    coll = hb.Collection(ctx, feats)
    assert coll.pooled_width == 3 + 2 + 3 and [coll.column(f) for f in range(5)] == [0, -1, 3, 5, -1]
    rng = np.random.default_rng(3)
    for step in range(3):
        B = 4
        lengths = rng.integers(1 if step == 0 else 0, 4, size=len(feats) * B)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        values = rng.integers(0, 10, size=int(offsets[-1])).astype(np.int64)
        weights = (rng.integers(1, 8, size=values.size) * 0.25).astype(np.float32)
        out = coll.lookup(values, offsets, weights=weights)
        unpooled = coll.unpooled_views(coll.last_unpooled, offsets)
        grad = rng.uniform(-1, 1, size=out.shape).astype(np.float32)
        grad_unp = rng.uniform(-1, 1, size=coll.unpooled_size(offsets)).astype(np.float32)
        # The reference: single-table lookups, pooled here; per-id gradients.
        per_table = {id(a): ([], []), id(b): ([], [])}
        gu = coll.unpooled_views(grad_unp, offsets)
        for f, (t, pooling) in enumerate(feats):
            twin = twin_a if t is a else twin_b
            lo, hi = int(offsets[f * B]), int(offsets[(f + 1) * B])
            rows = twin.lookup(values[lo:hi].copy())
            w = weights[lo:hi]
            if pooling == hb.POOLING_NONE:
                assert np.array_equal(unpooled[f], w[:, None] * rows)
                per_table[id(t)][0].append(values[lo:hi])
                per_table[id(t)][1].append(gu[f] * w[:, None])
                continue
            col = coll.column(f)
            for s in range(B):
                bl, bh = int(offsets[f * B + s]) - lo, int(offsets[f * B + s + 1]) - lo
                want = _pool_reference(rows[bl:bh], w[bl:bh], pooling)
                assert np.array_equal(out[s, col:col + t.dim], want), (step, f, s)
                n = np.float32(bh - bl)
                for k in range(bl, bh):
                    sc = np.float32(w[k])
                    if pooling == hb.POOLING_MEAN:
                        sc = np.float32(sc / n)
                    elif pooling == hb.POOLING_SQRTN:
                        sc = np.float32(sc / np.sqrt(n))
                    per_table[id(t)][0].append(values[lo + k:lo + k + 1])
                    per_table[id(t)][1].append((grad[s, col:col + t.dim] * sc)[None, :])
        coll.apply_gradients(values, offsets, grad, weights=weights, grad_unpooled=grad_unp)
        for t, twin in ((a, twin_a), (b, twin_b)):
            ids, gs = per_table[id(t)]
            if ids:
                twin.apply_gradients(np.concatenate(ids), np.concatenate(gs).astype(np.float32))
    every = np.arange(10, dtype=np.int64)
    assert np.array_equal(a.lookup(every), twin_a.lookup(every))
    assert np.array_equal(b.lookup(every), twin_b.lookup(every))
    st = coll.stats()
    assert st["lookups"] == 3 and st["reused_plans"] == 3 and st["rounds"] == 12, st


def test_collection_argument_errors(ctx):
    a = hb.Embedding(ctx, "ce", 2, num_rows=8)
    coll = hb.Collection(ctx, [a, a])
    with pytest.raises(ValueError):  # not num_features * B + 1 offsets
        coll.lookup(np.zeros(3, dtype=np.int64), np.array([0, 1, 2, 3], dtype=np.int64))
    with pytest.raises(TypeError):
        coll.lookup(np.zeros(3, dtype=np.int32), np.array([0, 1, 3], dtype=np.int64))
    with pytest.raises(ValueError):
        coll.lookup(np.zeros(2, dtype=np.int64), np.array([0, 1, 3], dtype=np.int64))
    with pytest.raises(hb.HbError) as info:  # id 9 outside [0, 8)
        coll.lookup(np.array([1, 9, 2], dtype=np.int64), np.array([0, 1, 3], dtype=np.int64))
    assert info.value.status == hb.ERR_INVALID_ARGUMENT and "9" in info.value.message
    with pytest.raises(hb.HbError):  # offsets decrease
        coll.lookup(np.array([1, 2, 3], dtype=np.int64), np.array([0, 2, 1], dtype=np.int64))
    with pytest.raises(TypeError):
        hb.Collection(ctx, ["not a table"])
    out = coll.lookup(np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64))  # B = 0
    assert out.shape == (0, 4)


def test_collection_pipelined_lookup_one_rank(ctx):
    """lookup_start / lookup_wait at one rank: the rows after the update
    made between them (as lookup after it), the misuse errors, and close()
    with a lookup started (the batch freed: bindings/python/hb_python.i)."""
    cfg = dict(num_rows=8, initializer=hb.INIT_CONSTANT, init_a=0.5, optimizer=hb.OPT_SGD,
               learning_rate=1.0)
    coll = hb.Collection(ctx, [hb.Embedding(ctx, "pl1", 2, **cfg)])
    ids, offsets = np.array([1, 2, 1], dtype=np.int64), np.array([0, 1, 3], dtype=np.int64)
    coll.lookup(ids, offsets)
    coll.lookup_start(ids, offsets)
    with pytest.raises(hb.HbValueError, match="call lookup_wait"):
        coll.lookup(ids, offsets)
    with pytest.raises(hb.HbValueError, match="call lookup_wait"):
        coll.lookup_start(ids, offsets)
    coll.apply_gradients(ids, offsets, np.ones((2, 2), dtype=np.float32))  # the lookup before the start
    got = coll.lookup_wait()
    # id 1 had two gradients of 1 (samples 0 and 1), id 2 one.
    assert np.array_equal(got, np.array([[0.5 - 2] * 2, [(0.5 - 1) + (0.5 - 2)] * 2], np.float32)), got
    with pytest.raises(hb.HbValueError, match="lookup_start"):
        coll.lookup_wait()
    coll.lookup_start(ids, offsets)
    coll.close()
    with pytest.raises(hb.HbValueError):
        coll.lookup_wait()
