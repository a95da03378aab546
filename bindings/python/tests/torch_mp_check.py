"""Multi-rank check of hb.torch, run by hbrun at world 1, 2 and 3 (ctest
python_torch_mp*): a small model (three tables: pooled sum with two features
and empty bags, a dynamic table with mean pooling and Adagrad, an unpooled
one; an MLP) trained data-parallel on a global batch split over the ranks.

- Every rank ends with bit-equal dense parameters (hb's rank-order
  allreduce), and every rank reads the same table rows.
- The module makes one collection lookup and one plan-reusing update per
  step (4 rounds for the three tables).
- Ranks that disagree on weights (a "mean" table: two collections) fail
  together with HB_ERR_MISMATCH.
- The result equals plain PyTorch trained on the whole global batch in one
  process (nn.EmbeddingBag / F.embedding with the same initial rows, the
  same optimizers) up to float rounding, at every world size.

    torch_mp_check.py [--save DIR]   train, check, then save a checkpoint and
                                     the values it must hold (DIR/expect.npz)
    torch_mp_check.py --load DIR     load DIR at this world size: every
                                     parameter and row bit-equal to expect.npz
    --mode per_table                 the tables looked up one by one and pooled
                                     by torch (per_table=True), on host
    --mode cuda                      GPU tables (one device collection per
                                     direction), CUDA batches and MLP (NCCL);
                                     prints "torch_mp_check skipped" without a GPU
    --placement ps                   the tables on the ps tasks (run under
                                     hbrun --ps: the ps task serves); the same
                                     checks against plain PyTorch, and --save
                                     writes a checkpoint that --load reads
                                     into sharded tables

After training (collection mode, world >= 2): ranks that build different
modules (a table's pooling sum vs sqrtn, a parameter (2, 3) vs (3, 2)) all
fail at construction, naming the field and every rank's value.
"""

import argparse
import os
import sys

import numpy as np
import torch

import hb
import hb.torch as ht

F = torch.nn.functional
G, STEPS, V = 12, 4, 20  # global batch (divisible by 1, 2, 3), steps, static rows
TAG_IDS = np.array([10 ** 12 + 7 * k for k in range(9)], np.int64)  # the dynamic table's ids
MODE, DEV = "collection", torch.device("cpu")  # set by main (--mode)
PLACEMENT = "workers"  # set by main (--placement)


def tables():
    dev = "cuda" if MODE == "cuda" else "cpu"
    return [
        ht.TableConfig("cat", 4, num_rows=V, features=["c1", "c2"], pooling="sum", initializer="normal",
                       init_b=0.5, seed=3, optimizer="sgd", learning_rate=0.5, device=dev, placement=PLACEMENT),
        ht.TableConfig("tag", 3, pooling="mean", initializer="uniform", init_a=-0.5, init_b=0.5, seed=4,
                       optimizer="adagrad", learning_rate=0.3, initial_accumulator=0.1, device=dev, placement=PLACEMENT),
        ht.TableConfig("seq", 2, num_rows=V, pooling="none", initializer="normal", init_b=1.0,
                       optimizer="sgd", learning_rate=0.2, device=dev, placement=PLACEMENT),
    ]


def mlp(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4 + 4 + 3 + 2, 5), torch.nn.ReLU(), torch.nn.Linear(5, 1))


class Model(torch.nn.Module):
    def __init__(self, ctx, seed):
        super().__init__()
        self.sparse = ht.EmbeddingCollection(ctx, tables(), per_table=MODE == "per_table")
        self.mlp = mlp(seed).to(DEV)

    def forward(self, kjt, dense, seq_seg):
        e = self.sparse(kjt)
        x = torch.cat([e["c1"], e["c2"], e["tag"], dense], 1)
        per_sample_seq = torch.zeros(dense.shape[0], device=dense.device).index_add(0, seq_seg, e["seq"].pow(2).sum(1))
        return self.mlp(x).squeeze(1), per_sample_seq


def batch(step, lo, hi):
    """Samples [lo, hi) of the global batch of step: lists of bags."""
    rng = np.random.RandomState(1000 + step)
    c1 = [list(rng.randint(0, V, rng.randint(0, 4))) for _ in range(G)]  # empty bags too
    c2 = [[int(rng.randint(0, V))] for _ in range(G)]
    tag = [list(TAG_IDS[rng.randint(0, len(TAG_IDS), rng.randint(1, 4))]) for _ in range(G)]
    seq = [list(rng.randint(0, V, rng.randint(0, 3))) for _ in range(G)]
    dense = rng.randn(G, 2).astype(np.float32)
    label = (rng.rand(G) < 0.5).astype(np.float32)
    return {k: v[lo:hi] for k, v in dict(c1=c1, c2=c2, tag=tag, seq=seq, dense=dense, label=label).items()}


def to_kjt(b):
    keys = ["c1", "c2", "tag", "seq"]
    bags = [bag for k in keys for bag in b[k]]
    values = torch.tensor([int(i) for bag in bags for i in bag], dtype=torch.int64)
    return ht.KeyedJaggedTensor(keys, values, lengths=torch.tensor([len(bag) for bag in bags], dtype=torch.int64))


def seq_segments(b):
    return torch.tensor([s for s, bag in enumerate(b["seq"]) for _ in bag], dtype=torch.int64)


def loss_of(logit, seq_term, label):
    return F.binary_cross_entropy_with_logits(logit, label) + 0.1 * seq_term.mean()


def train_hb(ctx, model):
    ddp = ht.DistributedDataParallel(model, ctx)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    per = G // ctx.world_size
    lo = ctx.rank * per
    for step in range(STEPS):
        b = batch(step, lo, lo + per)
        opt.zero_grad()
        logit, seq_term = ddp(to_kjt(b).to(DEV), torch.from_numpy(b["dense"]).to(DEV), seq_segments(b).to(DEV))
        loss_of(logit, seq_term, torch.from_numpy(b["label"]).to(DEV)).backward()
        opt.step()
    return opt


def lookup(ctx, table, ids):
    """Rows of ids as numpy (GPU tables: on torch's stream, then copied)."""
    if MODE != "cuda":
        return table.lookup(ids)
    ctx.set_cuda_stream(torch.cuda.current_stream(DEV).cuda_stream)
    out = torch.empty((ids.size, table.dim), dtype=torch.float32, device=DEV)
    table.lookup(torch.from_numpy(ids).to(DEV), out=out)
    return out.cpu().numpy()


def dense_state(model):
    return {k: v.cpu() for k, v in model.mlp.state_dict().items()}


def rows(ctx, model):
    t = model.sparse.tables
    return dict(cat=lookup(ctx, t["cat"], np.arange(V, dtype=np.int64)), tag=lookup(ctx, t["tag"], TAG_IDS),
                seq=lookup(ctx, t["seq"], np.arange(V, dtype=np.int64)))


def train_reference(initial_rows, seed):
    """The same model in plain PyTorch, one process, the whole global batch."""
    w = {k: torch.tensor(v, requires_grad=True) for k, v in initial_rows.items()}
    net = mlp(seed)
    tag_index = {int(i): k for k, i in enumerate(TAG_IDS)}
    opts = [torch.optim.SGD(net.parameters(), lr=0.1), torch.optim.SGD([w["cat"]], lr=0.5),
            torch.optim.Adagrad([w["tag"]], lr=0.3, initial_accumulator_value=0.1, eps=1e-8),
            torch.optim.SGD([w["seq"]], lr=0.2)]

    def bag(table, bags, mode, index=None):
        flat = [index[int(i)] if index else int(i) for b in bags for i in b]
        offsets = np.cumsum([0] + [len(b) for b in bags])[:-1]
        return F.embedding_bag(torch.tensor(flat, dtype=torch.int64), table,
                               torch.tensor(offsets, dtype=torch.int64), mode=mode)

    for step in range(STEPS):
        b = batch(step, 0, G)
        for o in opts:
            o.zero_grad()
        x = torch.cat([bag(w["cat"], b["c1"], "sum"), bag(w["cat"], b["c2"], "sum"),
                       bag(w["tag"], b["tag"], "mean", tag_index), torch.from_numpy(b["dense"])], 1)
        seq_rows = F.embedding(torch.tensor([int(i) for s in b["seq"] for i in s], dtype=torch.int64), w["seq"])
        seq_term = torch.zeros(G).index_add(0, seq_segments(b), seq_rows.pow(2).sum(1))
        loss_of(net(x).squeeze(1), seq_term, torch.from_numpy(b["label"])).backward()
        for o in opts:
            o.step()
    return net.state_dict(), {k: v.detach().numpy() for k, v in w.items()}


def check_trained(ctx, model):
    rank, world = ctx.rank, ctx.world_size
    initial = rows(ctx, model)  # collective lookups: every rank, same order
    opt = train_hb(ctx, model)
    # One collection exchange per direction for the three tables: a lookup
    # (header and ids, rows) and an update reusing its plan (1 round) per
    # step. A host collection's header rides in its ids round on the call
    # board (ranks on one host, calls checked: these tests' default); device
    # collections, world 1 and other transports keep two rounds.
    if MODE in ("collection", "cuda") and PLACEMENT == "workers":
        st = model.sparse.collection_stats()
        board = MODE == "collection" and world > 1 and not any(
            k in os.environ for k in ("HB_CPU_TRANSPORT", "HB_CPU_CHECK_CALLS"))
        per_step = (1 if board else 2) + 2
        assert (st["lookups"], st["updates"], st["reused_plans"], st["rounds"]) == \
            (STEPS, STEPS, STEPS, per_step * STEPS), st
    if PLACEMENT == "ps":  # the rows live on the ps tasks, pulled and pushed each step
        assert all(t.local_rows == 0 for t in model.sparse.tables.values())
        st = ctx.ps_stats()
        assert st["pushes"] >= world * STEPS * 3 and st["max_staleness"] == 0, st
    # Bit-equal on every rank: dense parameters, and the rows every rank reads.
    for name, p in dense_state(model).items():
        every = ctx.allgather(np.ascontiguousarray(p.numpy().ravel()))
        assert all(np.array_equal(every[0], every[r]) for r in range(world)), name
    final_rows = rows(ctx, model)
    for name, r in final_rows.items():
        every = ctx.allgather(np.ascontiguousarray(r.ravel()))
        assert all(np.array_equal(every[0], every[k]) for k in range(world)), name
    # Equal to plain PyTorch on the global batch (float rounding apart).
    ref_dense, ref_rows = train_reference(initial, seed=0)  # rank 0's MLP, broadcast by the wrapper
    for name, p in dense_state(model).items():
        want = ref_dense[name]
        assert torch.allclose(p, want, rtol=1e-5, atol=1e-6), (name, p, want)
    for name, r in final_rows.items():
        assert np.allclose(r, ref_rows[name], rtol=1e-5, atol=1e-6), (name, r, ref_rows[name])
        assert not np.array_equal(r, initial[name]), name + ": the table did not train"
    if rank == 0:
        print("torch_mp_check (%s, tables on the %s): world %d matches plain PyTorch; dense and rows "
              "bit-equal on every rank" % (MODE, PLACEMENT, world))
    return opt


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--save")
    p.add_argument("--load")
    p.add_argument("--mode", choices=("collection", "per_table", "cuda"), default="collection")
    p.add_argument("--placement", choices=("workers", "ps"), default="workers")
    a = p.parse_args()
    torch.set_num_threads(1)
    global MODE, DEV, PLACEMENT
    MODE, PLACEMENT = a.mode, a.placement
    with hb.Context() as ctx:
        if ctx.task_type == "ps":
            ctx.serve()
            return 0
        if MODE == "cuda":
            if not torch.cuda.is_available() or ctx.num_gpus <= 0 or not ctx.device.startswith("cuda:"):
                print("torch_mp_check skipped: no CUDA device for torch (%s) or hb (%s)"
                      % (torch.cuda.is_available(), ctx.device))
                return 0
            DEV = torch.device(ctx.device)
        # Rank 0's MLP initialisation (seed 0) wins the broadcast in the DDP
        # wrapper; the reference uses seed 0 too.
        model = Model(ctx, seed=0 if ctx.rank == 0 else 50 + ctx.rank)
        if a.load:
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            ht.load(a.load, model, ctx, opt)
            want = np.load(os.path.join(a.load, "expect.npz"))
            for name, p in dense_state(model).items():
                assert np.array_equal(p.numpy(), want["dense." + name]), name
            for name, r in rows(ctx, model).items():
                assert np.array_equal(r, want["rows." + name]), name
            if ctx.rank == 0:
                print("torch_mp_check: checkpoint loaded at world %d: bit-equal" % ctx.world_size)
            return 0
        opt = check_trained(ctx, model)
        if a.save:
            ht.save(a.save, model, ctx, opt)
            final = rows(ctx, model)
            if ctx.rank == 0:
                np.savez(os.path.join(a.save, "expect.npz"),
                         **{"dense." + k: v.numpy() for k, v in dense_state(model).items()},
                         **{"rows." + k: v for k, v in final.items()})
            ctx.barrier()
        if PLACEMENT == "ps":  # neither check applies: ps collections are not collective
            return 0
        check_weights_disagree(ctx, model)
        if ctx.world_size >= 2 and MODE == "collection":
            check_construction_mismatch(ctx)
    return 0


def expect_refused(ctx, build, needles):
    """build() raises HbValueError on every rank, its message naming every
    needle; the context still works afterwards."""
    try:
        build()
    except hb.HbValueError as e:
        for n in needles:
            assert n in e.message, "rank %d: %r lacks %r" % (ctx.rank, e.message, n)
    else:
        raise AssertionError("rank %d: ranks with different modules were not refused" % ctx.rank)
    ctx.barrier()


def check_construction_mismatch(ctx):
    """Rank 1 builds a different module: every rank fails at construction
    (the model's own tables are alive: these are named mm_*)."""
    odd = ctx.rank == 1
    others = "(rank 0)" if ctx.world_size == 2 else "(ranks 0,2)"

    def configs():
        cfgs = tables()
        for c in cfgs:
            c.name = "mm_" + c.name
        return cfgs
    # (a) pooling sum vs sqrtn: hb.torch pools both with the C collection's
    # SUM (it divides itself), so only its own check can see them differ.
    cfgs = configs()
    cfgs[1].pooling = "sqrtn" if odd else "sum"
    expect_refused(ctx, lambda: ht.EmbeddingCollection(ctx, cfgs),
                   ["hb.torch.EmbeddingCollection", "rank 1 differs",
                    "table 1 ('mm_tag') pooling: 'sum' %s vs 'sqrtn' (rank 1)" % others])
    # A hyperparameter left at hb's default on one rank and passed
    # explicitly on the others is the same configuration.
    cfgs = configs()
    if not odd:
        cfgs[0].hb_config["beta1"] = 0.9
    ht.EmbeddingCollection(ctx, cfgs).close()
    # (b) the same byte size in different shapes, and a dtype.
    def module():
        m = torch.nn.Module()
        m.w = torch.nn.Parameter(torch.zeros((3, 2) if odd else (2, 3)))
        m.b = torch.nn.Parameter(torch.zeros(4, dtype=torch.float64 if odd else torch.float32))
        return m
    expect_refused(ctx, lambda: ht.DistributedDataParallel(module(), ctx),
                   ["hb.torch.DistributedDataParallel", "rank 1 differs",
                    "parameter 0 ('w') shape: (2, 3) %s vs (3, 2) (rank 1)" % others,
                    "parameter 1 ('b') dtype: torch.float32 %s vs torch.float64 (rank 1)" % others])
    odd = False
    ht.DistributedDataParallel(module(), ctx)  # the same module on every rank: accepted
    if ctx.rank == 0:
        print("torch_mp_check: ranks that build different modules fail at construction, naming the field")


def check_weights_disagree(ctx, model):
    """With a "mean" table, weighted and unweighted batches run on two
    collections: ranks that disagree fail together with a clear error
    instead of waiting for each other."""
    if ctx.world_size < 2 or MODE != "collection":  # one collection per kind of batch
        return
    kjt = to_kjt(batch(0, 0, 2))
    if ctx.rank == 0:
        n = kjt.values().numel()
        kjt = ht.KeyedJaggedTensor(kjt.keys(), kjt.values(), offsets=kjt.offsets(), weights=torch.ones(n))
    try:
        with torch.no_grad():
            model.sparse(kjt)
    except hb.HbError as e:
        assert e.status == hb.ERR_MISMATCH, e
    else:
        raise AssertionError("ranks with and without weights were not refused")
    ctx.barrier()  # the context still works
    if ctx.rank == 0:
        print("torch_mp_check: ranks that disagree on weights fail together (HB_ERR_MISMATCH)")


if __name__ == "__main__":
    sys.exit(main())
