"""Cost of one training step of hb.torch's EmbeddingCollection (forward and
backward, no MLP) on the CTR demo's tables, beside the same step made of
single-table calls: one hb.Embedding lookup and one apply_gradients per
table, pooled in torch (what hb.torch did before it ran on hb.Collection).
Both paths run interleaved in blocks, so they share the machine's noise;
prints a table (milliseconds per step: min and median, wall and CPU of
rank 0; exchanges per step).

    hbrun -n 2 -- python3 bench/ctr_torch/module_step.py [--tables 26] [--batch 512]
        [--dim 8] [--vocab 2048] [--steps 60] [--block 10]

Needs the Python binding on PYTHONPATH (<build>/bindings/python) and torch.
"""

import argparse
import statistics
import sys
import time

import numpy as np
import torch

import hb
import hb.torch as ht

F = torch.nn.functional


def flags(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tables", type=int, default=26, help="one-hot tables; plus a wide table of --tables ids")
    p.add_argument("--batch", type=int, default=512, help="samples per rank and step")
    p.add_argument("--dim", type=int, default=8)
    p.add_argument("--vocab", type=int, default=2048)
    p.add_argument("--steps", type=int, default=60, help="timed steps per path")
    p.add_argument("--block", type=int, default=10, help="steps of one path before switching")
    return p.parse_args(argv)


def configs(f, prefix):
    cat = [ht.TableConfig("%s%02d" % (prefix, t), f.dim, num_rows=f.vocab, initializer="normal", init_b=0.05,
                          optimizer="adagrad", learning_rate=0.05) for t in range(f.tables)]
    return cat + [ht.TableConfig(prefix + "wide", 1, num_rows=f.vocab * f.tables, optimizer="adagrad",
                                 learning_rate=0.05)]


def batch(f, rng):
    """Per table: (ids, offsets) of B bags (one id; the wide table: T ids)."""
    b, t = f.batch, f.tables
    ids = rng.integers(0, f.vocab, size=(b, t), dtype=np.int64)
    per_table = [(np.ascontiguousarray(ids[:, k]), np.arange(b, dtype=np.int64)) for k in range(t)]
    wide = (ids + np.arange(t, dtype=np.int64) * f.vocab).reshape(-1)
    return per_table + [(wide, np.arange(b, dtype=np.int64) * t)]


class Collection:
    """hb.torch's module: one collection lookup, one update."""

    def __init__(self, ctx, f):
        self.ec = ht.EmbeddingCollection(ctx, configs(f, "c"), average_gradients=False)
        self.keys = self.ec.feature_names()

    def step(self, data, upstream):
        values = torch.from_numpy(np.concatenate([ids for ids, _ in data]))
        lengths = torch.from_numpy(np.concatenate([np.diff(np.append(off, ids.size)) for ids, off in data]))
        out = self.ec(ht.KeyedJaggedTensor(self.keys, values, lengths=lengths))
        (out.pooled * upstream).sum().backward()

    def rounds(self):
        return self.ec.collection_stats()["rounds"]


class SingleTables:
    """The same tables through the single-table calls, pooled in torch."""

    def __init__(self, ctx, f):
        self.tables = [hb.Embedding(ctx, c.name, c.dim, **c.hb_config) for c in configs(f, "s")]

    def step(self, data, upstream):
        leaves, pooled = [], []
        for t, (ids, off) in zip(self.tables, data):
            rows = torch.from_numpy(t.lookup(ids)).requires_grad_()
            leaves.append(rows)
            pooled.append(F.embedding_bag(torch.arange(ids.size), rows, torch.from_numpy(off), mode="sum"))
        (torch.cat(pooled, 1) * upstream).sum().backward()
        for t, (ids, _), rows in zip(self.tables, data, leaves):
            t.apply_gradients(ids, rows.grad.numpy())

    def rounds(self):
        return None


def main(argv):
    f = flags(argv)
    torch.set_num_threads(1)
    with hb.Context() as ctx:
        paths = {"hb.torch (one collection)": Collection(ctx, f),
                 "single-table calls": SingleTables(ctx, f)}
        width = f.tables * f.dim + 1
        upstream = torch.from_numpy(np.random.default_rng(1).standard_normal((f.batch, width), dtype=np.float32))
        rng = np.random.default_rng(100 + ctx.rank)
        wall = {k: [] for k in paths}
        cpu = {k: [] for k in paths}
        for p in paths.values():  # warm up: first touches of rows, allocations
            p.step(batch(f, rng), upstream)
        rounds0 = {k: p.rounds() for k, p in paths.items()}
        done = 0
        while done < f.steps:
            n = min(f.block, f.steps - done)
            for k, p in paths.items():
                for _ in range(n):
                    data = batch(f, rng)
                    ctx.barrier()
                    w0, c0 = time.perf_counter(), time.process_time()
                    p.step(data, upstream)
                    wall[k].append(time.perf_counter() - w0)
                    cpu[k].append(time.process_time() - c0)
            done += n
        if ctx.rank == 0:
            print("hb.torch module step: world %d, %d one-hot tables + a wide one (%d ids/sample), batch %d, "
                  "dim %d, %d steps per path" % (ctx.world_size, f.tables, f.tables, f.batch, f.dim, f.steps))
            print("%-28s %10s %10s %10s %10s %12s" % ("path", "wall min", "wall med", "cpu min", "cpu med",
                                                   "exch/step"))
            for k, p in paths.items():
                r = p.rounds()
                # The single-table calls: 6 exchanges per table and step
                # (docs/embedding-collections.md, "Rounds"); no counter here.
                exch = "%.1f" % ((r - rounds0[k]) / f.steps) if r is not None else "%d (docs)" % (
                    6 * (f.tables + 1))
                print("%-28s %10.2f %10.2f %10.2f %10.2f %12s" % (
                    k, 1e3 * min(wall[k]), 1e3 * statistics.median(wall[k]), 1e3 * min(cpu[k]),
                    1e3 * statistics.median(cpu[k]), exch))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
