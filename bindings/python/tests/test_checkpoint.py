"""hb.Checkpoint (numpy buffers, tables, readers, metrics) and
hb.torch.Checkpoint (a module's and optimizer's state, bit for bit) in one
process (ctest python_binding). Multi-process kills: tests/recovery."""

import gc
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hb  # noqa: E402


@pytest.fixture
def ctx():
    with hb.Context(rank=0, world_size=1) as c:
        yield c


def _state(ctx, tmp_path):
    table = hb.Embedding(ctx, "t", 4, num_rows=50, optimizer=hb.OPT_ADAGRAD,
                         initializer=hb.INIT_UNIFORM, init_a=-0.1, init_b=0.1)
    data = tmp_path / "data.txt"
    data.write_text("".join("%d\t%d\t%x\n" % (i % 2, i, i % 50) for i in range(300)))
    reader = hb.Reader([str(data)], ctx, batch_size=16, columns="LIC", num_rows=50)
    metric = hb.Metric(hb.METRIC_AUC_EXACT, ctx)
    return table, reader, metric


def _step(table, reader, metric, w, k):
    b = reader.next()
    ids = np.ascontiguousarray(b.ids)
    table.apply_gradients(ids, np.full((ids.size, 4), 0.01 * (k + 1), np.float32))
    w += np.float32(0.5) / (k + 1)
    metric.update(b.labels, (b.dense[:, 0] % 7 / 7.0).astype(np.float32))
    return b.dense[:, 0].copy()


@pytest.mark.parametrize("async_write", [False, True])
def test_numpy_state_round_trip_is_bit_identical(ctx, tmp_path, async_write):
    d = tmp_path / "ckpt"
    table, reader, metric = _state(ctx, tmp_path)
    ck = hb.Checkpoint(ctx, d, async_write=async_write, job_id="py")
    w = np.zeros(8, np.float32)
    ck.add_table(table)
    ck.add_buffer("w", w)
    ck.add_buffer("scratch", np.zeros(3, np.int64), per_rank=True)  # kept alive by ck
    gc.collect()
    ck.add_reader(reader)
    ck.add_metric("auc", metric)
    assert ck.restore_latest() == -1
    for k in range(4):
        _step(table, reader, metric, w, k)
    ck.set_meta("note", "four")
    ck.save(4)
    want = [_step(table, reader, metric, w, k) for k in range(4, 9)]
    ck.wait()
    rows, w_end, auc = table.lookup(np.arange(50)), w.copy(), metric.result()
    assert ck.stats["committed_step"] == 4
    path, step = hb.Checkpoint.latest(d)
    assert step == 4 and os.path.basename(path).startswith("ckpt-000000000004-")

    assert ck.restore_latest() == 4
    assert ck.get_meta("note") == "four" and ck.get_meta("missing") is None
    got = [_step(table, reader, metric, w, k) for k in range(4, 9)]
    for a, b in zip(want, got):
        np.testing.assert_array_equal(a, b)  # the same samples, in order
    np.testing.assert_array_equal(table.lookup(np.arange(50)), rows)
    np.testing.assert_array_equal(w, w_end)
    assert metric.result() == auc
    assert ck.stats["restored_path"] == path
    ck.close()


def test_buffers_are_checked(ctx, tmp_path):
    ck = hb.Checkpoint(ctx, tmp_path / "c")
    with pytest.raises(hb.HbTypeError):
        ck.add_buffer("x", [1.0, 2.0])
    with pytest.raises(hb.HbValueError):
        ck.add_buffer("x", np.zeros((4, 4), np.float32)[:, 1])
    with pytest.raises(hb.HbError):
        ck.add_buffer("bad/name", np.zeros(2))


def test_a_closed_registered_handle_is_refused(ctx, tmp_path):
    ck = hb.Checkpoint(ctx, tmp_path / "c")
    t = hb.Embedding(ctx, "closed", 2, num_rows=4)
    ck.add_table(t)
    t.close()
    with pytest.raises(hb.HbValueError):
        ck.save(1)


def test_another_jobs_directory_is_refused(ctx, tmp_path):
    hb.Checkpoint(ctx, tmp_path, job_id="a").close()
    with pytest.raises(hb.HbError) as e:
        hb.Checkpoint(ctx, tmp_path, job_id="b")
    assert "'a'" in str(e.value) and "'b'" in str(e.value)


def test_latest_of_missing_dir(tmp_path):
    assert hb.Checkpoint.latest(tmp_path / "none") == (None, -1)


# ---- hb.torch --------------------------------------------------------------------

def _torch_model(ht, torch, ctx):
    torch.manual_seed(0)
    emb = ht.EmbeddingCollection(ctx, [ht.TableConfig("tt", 4, num_rows=20, optimizer="adagrad",
                                                      initializer="uniform", init_a=-0.1,
                                                      init_b=0.1, learning_rate=0.1)])
    model = torch.nn.ModuleDict({"emb": emb, "lin": torch.nn.Linear(4, 1)})
    model.register_buffer("calls", torch.zeros(2))
    opt = torch.optim.Adam(model["lin"].parameters(), lr=0.01)
    return model, opt


def _torch_step(ht, torch, model, opt, k):
    g = torch.Generator().manual_seed(k)
    ids = torch.randint(0, 20, (6,), generator=g)
    kjt = ht.KeyedJaggedTensor(["tt"], ids, lengths=torch.ones(6, dtype=torch.int64))
    x = model["emb"](kjt)["tt"]
    y = torch.sigmoid(model["lin"](x)).squeeze(1)
    loss = torch.nn.functional.binary_cross_entropy(y, (ids % 2).float())
    opt.zero_grad()
    loss.backward()
    opt.step()
    model.calls += 1


@pytest.mark.parametrize("async_write", [False, True])
def test_torch_module_and_optimizer_resume_bit_identical(ctx, tmp_path, async_write):
    torch = pytest.importorskip("torch")
    import hb.torch as ht
    torch.set_num_threads(1)
    d = tmp_path / "tck"
    model, opt = _torch_model(ht, torch, ctx)
    ck = ht.Checkpoint(ctx, model, opt, dir=d, async_write=async_write, job_id="t")
    assert ck.restore_latest() == -1
    for k in range(3):
        _torch_step(ht, torch, model, opt, k)
    ck.save(3)
    for k in range(3, 6):
        _torch_step(ht, torch, model, opt, k)
    ck.wait()
    want = {k: v.clone() for k, v in model.state_dict().items()}
    want_rows = model["emb"].tables["tt"].lookup(np.arange(20))
    want_opt = opt.state_dict()["state"]
    ck.close()
    model["emb"].tables["tt"].close()

    # A fresh process's objects: new module and optimizer (no state yet).
    model2, opt2 = _torch_model(ht, torch, ctx)
    ck2 = ht.Checkpoint(ctx, model2, opt2, dir=d, async_write=async_write, job_id="t")
    assert ck2.restore_latest() == 3
    for k in range(3, 6):
        _torch_step(ht, torch, model2, opt2, k)
    for k, v in model2.state_dict().items():
        assert torch.equal(v, want[k]), k
    np.testing.assert_array_equal(model2["emb"].tables["tt"].lookup(np.arange(20)), want_rows)
    for p, st in opt2.state_dict()["state"].items():
        for name, v in st.items():
            assert torch.equal(v, want_opt[p][name]), (p, name)
    # A damaged optimizer file is refused.
    path = ck2.hb.stats["restored_path"]
    with open(os.path.join(path, "torch_optimizer.pt"), "ab") as f:
        f.write(b"x")
    with pytest.raises(hb.HbError) as e:
        ck2.restore_latest()
    assert "damaged" in str(e.value)
    ck2.close()
