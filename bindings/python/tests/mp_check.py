"""Multi-rank check of the Python binding, run by hbrun (ctest
python_binding_mp, and python_binding_run through ``python -m hb.run``):
allreduce, an embedding lookup/update and AUC against references computed
here, plus the error paths."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hb  # noqa: E402
from reference import exact_auc, samples  # noqa: E402


def check_allreduce(ctx):
    rank, world = ctx.rank, ctx.world_size
    x = np.arange(8, dtype=np.float32) * (rank + 1)
    got = ctx.allreduce(x)
    want = np.arange(8, dtype=np.float32) * sum(r + 1 for r in range(world))
    assert np.array_equal(got, want), (got, want)
    y = np.array([rank, -rank, 7], dtype=np.int64)
    ctx.allreduce(y, recv=y, op=hb.MAX)  # in place
    assert y.tolist() == [world - 1, 0, 7], y
    g = ctx.allgather(np.full(3, rank, dtype=np.int32))
    assert g.tolist() == [[r] * 3 for r in range(world)], g


def check_allreduce_start(ctx):
    rank, world = ctx.rank, ctx.world_size
    rng = np.random.default_rng(rank)
    # Magnitudes far apart: any other order than rank order changes bits.
    xs = [(rng.standard_normal(3001) * 10.0 ** rng.integers(-6, 7, 3001)).astype(np.float32)
          for _ in range(2)]
    want = [ctx.allreduce(x) for x in xs]
    # Two in flight, one in place, a blocking collective between start and wait.
    inplace = xs[1].copy()
    reqs = [ctx.allreduce_start(xs[0]), ctx.allreduce_start(inplace, recv=inplace)]
    assert ctx.allreduce(np.ones(2, dtype=np.int64)).tolist() == [world, world]
    got = [r.wait() for r in reqs]
    assert got[1] is inplace and all(r.done for r in reqs)
    for g, w in zip(got, want):
        assert g.tobytes() == w.tobytes(), "allreduce_start differs from allreduce"
    try:
        reqs[0].wait()
    except hb.HbValueError as e:
        assert "already waited" in str(e), e
    else:
        raise AssertionError("a second wait accepted")
    # The request keeps the arrays alive: nothing else refers to them here.
    req = ctx.allreduce_start(np.full(5, rank + 1, dtype=np.float64), op=hb.MAX)
    assert req.wait().tolist() == [float(world)] * 5


def check_embedding(ctx):
    rank, world = ctx.rank, ctx.world_size
    lr, init = 0.125, 0.5
    with hb.Embedding(ctx, "mp_table", 4, initializer=hb.INIT_CONSTANT, init_a=init,
                      optimizer=hb.OPT_SGD, learning_rate=lr) as emb:
        ids = np.array([rank, 7, 100 + rank, 7], dtype=np.int64)  # 7 twice: summed
        rows = emb.lookup(ids)
        assert rows.shape == (4, 4) and np.all(rows == init), rows
        grads = np.full((4, 4), rank + 1, dtype=np.float32)
        emb.apply_gradients(ids, grads)
        every = np.array([r for r in range(world)] + [7] + [100 + r for r in range(world)],
                         dtype=np.int64)
        got = emb.lookup(every)
        want = {7: init - lr * sum(2 * (r + 1) for r in range(world))}
        for r in range(world):
            want[r] = want[100 + r] = init - lr * (r + 1)
        for i, row in zip(every.tolist(), got):
            assert np.allclose(row, want[i], rtol=0, atol=1e-6), (i, row, want[i])
        # Ranks may look up different numbers of ids, including none.
        emb.lookup(np.arange(rank * 3, dtype=np.int64))


def check_auc(ctx):
    rank, world = ctx.rank, ctx.world_size
    labels, preds, weights = samples(1000)
    with hb.Metric(hb.METRIC_AUC_EXACT, ctx) as dist, hb.Metric(hb.METRIC_AUC_EXACT) as local:
        mine = [np.ascontiguousarray(a[rank::world]) for a in (labels, preds, weights)]
        dist.update(*mine)
        local.update(labels, preds, weights)
        got, single = dist.result(), local.result()
    want = exact_auc(labels, preds, weights)
    assert got == single, (got, single)
    assert abs(got - want) < 1e-12, (got, want)


def check_train(ctx):
    """hb.train over unbalanced data: rank r has 3 + 2r batches; every rank
    runs the same steps and evaluates at the same ones."""
    import hb.train
    rank, world = ctx.rank, ctx.world_size
    labels, preds, _ = samples(200)
    fed = []
    with hb.Metric(hb.METRIC_AUC_EXACT, ctx) as auc:
        history = hb.train.train(
            lambda step, batch: fed.append(batch), data=range(3 + 2 * rank), eval_every=2,
            eval_fn=lambda step, ms: ms["auc"].update(
                np.ascontiguousarray(labels[rank::world]), np.ascontiguousarray(preds[rank::world])),
            metrics={"auc": auc}, ctx=ctx)
    steps = 3 + 2 * (world - 1)
    assert fed == list(range(3 + 2 * rank)) + [None] * (steps - 3 - 2 * rank), fed
    assert [r.step for r in history] == list(range(2, steps + 1, 2)) + ([steps] if steps % 2 else [])
    want = exact_auc(labels, preds)
    assert all(abs(r.values["auc"] - want) < 1e-12 for r in history), history


def check_pipelined_lookup(ctx):
    """Collection.lookup_start / lookup_wait, pipelined as a training step
    (the next batch started before this one's update), bit-equal to
    lookup after the update on twin tables; ranks with different batch
    sizes (one empty); then the misuse errors."""
    rank, world = ctx.rank, ctx.world_size
    cfg = dict(num_rows=40, initializer=hb.INIT_CONSTANT, init_a=0.25, optimizer=hb.OPT_ADAGRAD,
               learning_rate=0.1)
    colls = []
    for twin in ("sync", "pipe"):
        a = hb.Embedding(ctx, "pl_a_" + twin, 3, **cfg)
        b = hb.Embedding(ctx, "pl_b_" + twin, 2, **cfg)
        # Different rows per id (the same on both twins), so a wrong row shows.
        every = np.arange(40, dtype=np.int64)
        a.apply_gradients(every, np.sin(np.arange(120, dtype=np.float32)).reshape(40, 3))
        b.apply_gradients(every, np.cos(np.arange(80, dtype=np.float32)).reshape(40, 2))
        colls.append(((a, b), hb.Collection(ctx, [(a, hb.POOLING_SUM), (b, hb.POOLING_NONE),
                                                  (a, hb.POOLING_MEAN)])))
    rng = np.random.default_rng(7 + rank)
    batches = []
    for k in range(5):
        B = 0 if (k == 2 and rank == 1) else 3 + rank
        lengths = rng.integers(0, 4, size=3 * B)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        values = rng.integers(0, 40, size=int(offsets[-1])).astype(np.int64)
        weights = rng.uniform(0.5, 2, size=values.size).astype(np.float32)
        grad = rng.uniform(-1, 1, size=(B, 6)).astype(np.float32)
        grad_unp = rng.uniform(-1, 1, size=int(offsets[2 * B] - offsets[B]) * 2).astype(np.float32)
        batches.append((values, offsets, weights, grad, grad_unp))
    (_, sync), (tables, pipe) = colls
    want = []
    for values, offsets, weights, grad, grad_unp in batches:  # the reference: one lookup per step
        want.append((sync.lookup(values, offsets, weights=weights).copy(), sync.last_unpooled.copy()))
        sync.apply_gradients(values, offsets, grad, weights=weights, grad_unpooled=grad_unp)
    values, offsets, weights = batches[0][:3]
    pipe.lookup_start(values, offsets, weights=weights)
    for k, (values, offsets, weights, grad, grad_unp) in enumerate(batches):
        out = pipe.lookup_wait()
        unpooled = pipe.last_unpooled
        if k + 1 < len(batches):
            nv, no, nw = batches[k + 1][:3]
            pipe.lookup_start(nv, no, weights=nw)
        assert np.array_equal(out, want[k][0]) and np.array_equal(unpooled, want[k][1]), (rank, k)
        pipe.apply_gradients(values, offsets, grad, weights=weights, grad_unpooled=grad_unp)
    every = np.arange(40, dtype=np.int64)
    for t_sync, t_pipe in zip(colls[0][0], tables):
        assert np.array_equal(t_sync.lookup(every), t_pipe.lookup(every)), rank
    # Misuse: errors naming what to call, on every rank alike; a start
    # refused by libhb (an id out of range on rank 0 only) fails everywhere
    # and leaves nothing started.
    values, offsets = batches[0][:2]
    for bad in ("wait", "start", "lookup"):
        try:
            if bad == "wait":
                pipe.lookup_wait()
            else:
                pipe.lookup_start(values, offsets)
                getattr(pipe, "lookup_start" if bad == "start" else "lookup")(values, offsets)
        except hb.HbValueError as e:
            assert ("lookup_start() first" if bad == "wait" else "call lookup_wait() first") in str(e), e
        else:
            raise AssertionError("pipelined misuse accepted: " + bad)
        if bad != "wait":
            pipe.lookup_wait()
    bad_values = values.copy()
    if rank == 0 and bad_values.size:
        bad_values[0] = 99
    try:  # libhb finds the bad id in the start or in the wait (on its owner)
        pipe.lookup_start(bad_values, offsets)
        pipe.lookup_wait()
    except hb.HbError as e:
        assert e.status == hb.ERR_INVALID_ARGUMENT and "99" in e.message, e
    else:
        raise AssertionError("id 99 of a 40-row table accepted")
    try:
        pipe.lookup_wait()
    except hb.HbValueError:
        pass
    else:
        raise AssertionError("a failed lookup left a lookup to wait for")
    # Closing with a lookup started drops it (and frees its batch).
    pipe.lookup_start(values, offsets)
    for (a, b), c in colls:
        c.close()
        a.close()
        b.close()


def check_dense_step(ctx):
    """Collection.apply_gradients(dense=...): the dense sum in the update's
    exchange, bit-equal to ctx.allreduce of the same arrays, the tables to
    twins updated without it; in place and into dense_out; ranks that pass
    different sizes all get ERR_MISMATCH."""
    rank = ctx.rank
    cfg = dict(num_rows=30, initializer=hb.INIT_CONSTANT, init_a=0.5, optimizer=hb.OPT_ADAGRAD,
               learning_rate=0.1)
    twins = []
    for twin in ("plain", "fused"):
        t = hb.Embedding(ctx, "dn_" + twin, 4, **cfg)
        twins.append((t, hb.Collection(ctx, [(t, hb.POOLING_SUM), (t, hb.POOLING_MEAN)])))
    (t0, plain), (t1, fused) = twins
    rng = np.random.default_rng(11 + rank)
    for k in range(4):
        B = 2 + rank
        lengths = rng.integers(0, 3, size=2 * B)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        values = rng.integers(0, 30, size=int(offsets[-1])).astype(np.int64)
        grad = rng.uniform(-1, 1, size=(B, 8)).astype(np.float32)
        dense = (rng.uniform(-1, 1, size=257) * 10.0 ** rng.integers(-8, 9, size=257)).astype(np.float32)
        dense[0] = (1.0, 1e8, -1e8, 3.0)[rank % 4]  # order-sensitive
        want = ctx.allreduce(dense)
        for c in (plain, fused):
            c.lookup(values, offsets)
        plain.apply_gradients(values, offsets, grad)
        if k % 2:
            out = np.full_like(dense, -7)
            got = fused.apply_gradients(values, offsets, grad, dense=dense, dense_out=out)
            assert got is out
        else:
            got = fused.apply_gradients(values, offsets, grad, dense=dense)
            assert got is dense
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (rank, k)
    every = np.arange(30, dtype=np.int64)
    assert np.array_equal(t0.lookup(every), t1.lookup(every)), rank
    try:
        fused.apply_gradients(values, offsets, grad, dense=np.zeros(5 if rank == 0 else 6, np.float32))
    except hb.HbError as e:
        assert e.status == hb.ERR_MISMATCH and "dense count" in e.message, e
    else:
        raise AssertionError("different dense sizes accepted")
    try:
        fused.apply_gradients(values, offsets, grad, dense=np.zeros(3, np.float32),
                              dense_out=np.zeros(4, np.float32))
    except hb.HbValueError as e:
        assert "dense_out" in str(e), e
    else:
        raise AssertionError("a dense_out of another size accepted")
    for t, c in twins:
        c.close()
        t.close()


def check_errors(ctx):
    try:
        ctx.set_option("no_such_option", "1")
    except hb.HbError as e:
        assert e.status == hb.ERR_CONFIG and "no_such_option" in e.message, e
    else:
        raise AssertionError("unknown option accepted")
    try:
        ctx.allreduce(np.zeros(4, np.float32), recv=np.zeros(2, np.float32))
    except ValueError as e:
        assert "recv" in str(e), e
    else:
        raise AssertionError("short recv accepted")


def main():
    with hb.Context() as ctx:
        assert ctx.world_size >= 2, "run me under hbrun -n 2 or more"
        check_allreduce(ctx)
        check_allreduce_start(ctx)
        check_embedding(ctx)
        check_auc(ctx)
        check_train(ctx)
        check_pipelined_lookup(ctx)
        check_dense_step(ctx)
        check_errors(ctx)
        ctx.barrier()
        print("rank %d of %d: python binding ok" % (ctx.rank, ctx.world_size))


if __name__ == "__main__":
    main()
