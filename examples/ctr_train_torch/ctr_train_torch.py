"""End-to-end CTR training with PyTorch and hb.torch: the model and data of
examples/ctr_train (C++) and examples/ctr_train_py (numpy), same flags.

    python3 -m hb.run -n 4 -- ctr_train_torch.py [--train-samples N] [--batch B] [--out DIR] ...

criteo-synth samples (../ctr_train_py/synth_data.py) with a planted
logistic model. The model is an nn.Module: an hb.torch.EmbeddingCollection
of 26 sharded tables (one id per sample each) plus a wide table (26 ids per
sample, sum-pooled), and an MLP (nn.Linear, ReLU, nn.Linear) wrapped in
hb.torch.DistributedDataParallel. autograd does the backward pass; the
tables' Adagrad runs at the rank that owns each row, inside
loss.backward(); the MLP's gradients are summed over the ranks with hb's
bucketed allreduce and stepped by torch.optim.Adagrad. Ranks hold uneven
shards; hb.torch.data_sync keeps them in step (a rank out of data runs
empty batches). Every --eval-every steps the held-out split is scored with
the exact AUC (merged across ranks). At the end: a checkpoint
(hb.torch.save: the MLP plus the tables), a serving export per table, and
the final AUC next to the planted model's AUC.
"""

import os
import sys
import time

import numpy as np
import torch
from torch import nn

import hb
import hb.torch as ht

sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ctr_train_py"))
import ctr_train as numpy_demo  # noqa: E402  (flags, data sharding, initial MLP weights)
import synth_data as synth  # noqa: E402

T, DENSE = synth.TABLES, synth.DENSE
CAT = ["cat_%02d" % t for t in range(T)]


class CtrModel(nn.Module):
    """26 embedded categorical features, a wide (linear) part and an MLP."""

    def __init__(self, ctx, f):
        super().__init__()
        adagrad = dict(seed=f.seed, optimizer="adagrad", learning_rate=f.lr, initial_accumulator=0.1)
        # Gradients arrive already divided by the global batch (see Trainer.step):
        # the tables sum them over the ranks, as the MLP's allreduce does.
        self.sparse = ht.EmbeddingCollection(ctx, [
            ht.TableConfig(name, f.dim, num_rows=f.vocab, initializer="normal", init_a=0.0, init_b=0.05,
                           **adagrad) for name in CAT
        ] + [ht.TableConfig("wide", 1, num_rows=f.vocab * T, initializer="zeros", **adagrad)],
            average_gradients=False)
        n_in = T * f.dim + DENSE
        self.mlp = nn.Sequential(nn.Linear(n_in, f.hidden), nn.ReLU(), nn.Linear(f.hidden, 1))
        # The numpy demo's initial weights (the same as the C++ demo's).
        w1, b1, w2, b2 = numpy_demo.Dense(n_in, f.hidden, f.seed).params
        with torch.no_grad():
            for p, v in zip(self.mlp.parameters(), (w1, b1, w2.reshape(1, -1), b2)):
                p.copy_(torch.from_numpy(v))
        self.register_buffer("table_offsets", torch.arange(T, dtype=torch.int64) * f.vocab, persistent=False)

    def features(self, ids):
        """The jagged input of a batch of ids (n, T): feature t's n ids, one
        per sample, then the wide feature's 26 ids per sample."""
        n = ids.shape[0]
        values = torch.cat([ids.t().reshape(-1), (ids + self.table_offsets).reshape(-1)])
        lengths = torch.cat([torch.ones(T * n, dtype=torch.int64), torch.full((n,), T, dtype=torch.int64)])
        return ht.KeyedJaggedTensor(CAT + ["wide"], values, lengths=lengths)

    def forward(self, ids, dense):
        e = self.sparse(self.features(ids))
        x = torch.cat([e[name] for name in CAT] + [dense], dim=1)
        return self.mlp(x).squeeze(1) + e["wide"].squeeze(1)  # logits


class Trainer:
    def __init__(self, ctx, f):
        self.ctx, self.f = ctx, f
        self.rank, self.world = ctx.rank, ctx.world_size
        self.gen = synth.Generator(f.seed, f.vocab)
        self.model = CtrModel(ctx, f)
        self.ddp = ht.DistributedDataParallel(self.model, ctx, average_gradients=False)
        self.opt = torch.optim.Adagrad(self.ddp.parameters(), lr=f.lr, initial_accumulator_value=0.1, eps=0.0)
        self.shard_begin, self.shard_end = numpy_demo.plan_train_shard(f, self.world, self.rank)

    def batch(self, split, begin, end):
        s = self.gen.sample(split, begin, end)
        return s, torch.from_numpy(s.ids), torch.from_numpy(s.dense), torch.from_numpy(s.label)

    def step(self, begin, end):
        """One training step on samples [begin, end) (maybe empty); returns
        (global samples, global loss sum, this rank's labels, probabilities)."""
        _, ids, dense, label = self.batch(0, begin, end)
        logits = self.ddp(ids, dense)
        loss_sum = nn.functional.binary_cross_entropy_with_logits(logits, label, reduction="sum")
        stats = ht.all_reduce(self.ctx, torch.tensor([float(end - begin), loss_sum.item()], dtype=torch.float64))
        global_n = stats[0].item()
        self.opt.zero_grad()
        (loss_sum / global_n).backward()  # the tables step here; the MLP's gradients are summed
        self.opt.step()
        return global_n, stats[1].item(), label, torch.sigmoid(logits.detach())

    def evaluate(self):
        """Exact AUC of the model and of the planted model on the held-out
        split, merged over the ranks."""
        f = self.f
        with ht.Metric(hb.METRIC_AUC_EXACT, self.ctx) as model, \
                ht.Metric(hb.METRIC_AUC_EXACT, self.ctx) as planted, torch.no_grad():
            begin, end = hb.shard_range(f.eval_samples, self.world, self.rank)
            # Every rank runs the same number of (collective) lookups.
            n = ht.all_reduce(self.ctx, torch.tensor([-(-(end - begin) // f.batch)]), op=hb.MAX)
            for k in range(int(n[0])):
                lo = min(end, begin + k * f.batch)
                hi = min(end, lo + f.batch)
                s, ids, dense, label = self.batch(1, lo, hi)
                model.update(label, torch.sigmoid(self.model(ids, dense)))
                planted.update(label, torch.from_numpy(s.planted_prob))
            return model.result(), planted.result()

    def run(self):
        f, ctx = self.f, self.ctx
        chief = ctx.is_chief
        if chief:
            print("ctr_train_torch.py: world %d, %d train samples in %d files (this rank: %d), batch %d/rank, "
                  "%d tables x dim %d + wide, MLP %d-%d-1, torch %s"
                  % (self.world, f.train_samples, f.files, self.shard_end - self.shard_begin, f.batch,
                     T, f.dim, T * f.dim + DENSE, f.hidden, torch.__version__), flush=True)
        running_auc = ht.Metric(hb.METRIC_AUC, ctx)  # TF-compatible thresholded AUC
        pos, step, interval_samples, interval_loss = self.shard_begin, 0, 0, 0.0
        t0 = t_interval = time.monotonic()
        while True:
            cont, empty = ht.data_sync(ctx, pos < self.shard_end)
            if not cont:
                break
            lo = pos
            hi = pos if empty else min(self.shard_end, pos + f.batch)
            pos = hi
            n, loss, label, prob = self.step(lo, hi)
            running_auc.update(label, prob)
            interval_samples += int(n)
            interval_loss += loss
            step += 1
            if step % f.log_every == 0:
                r = running_auc.result()
                running_auc.reset()
                now = time.monotonic()
                if chief:
                    print("step %5d  samples/s %9.0f  loss %.4f  running AUC %.4f"
                          % (step, interval_samples / (now - t_interval), interval_loss / interval_samples, r),
                          flush=True)
                t_interval, interval_samples, interval_loss = now, 0, 0.0
            if step % f.eval_every == 0:
                auc, planted = self.evaluate()
                if chief:
                    print("step %5d  held-out exact AUC %.4f (planted model %.4f)" % (step, auc, planted),
                          flush=True)
        running_auc.close()
        train_s = time.monotonic() - t0
        auc, planted = self.evaluate()

        # Checkpoint (MLP + tables, loadable at any world size) and serving export.
        ckpt, exp = os.path.join(f.out, "checkpoint"), os.path.join(f.out, "export")
        ht.save(ckpt, self.ddp, ctx, self.opt)
        if chief:
            os.makedirs(exp, exist_ok=True)
        ctx.barrier()
        for name, table in self.model.sparse.tables.items():
            table.export(os.path.join(exp, name + ".hbe"))
        ok = auc >= planted - f.max_gap
        if chief:
            print("final: %d steps in %.1f s; held-out exact AUC %.4f vs planted model %.4f "
                  "(gap %.4f, allowed %.2f): %s"
                  % (step, train_s, auc, planted, planted - auc, f.max_gap, "OK" if ok else "TOO LOW"))
            print("final: checkpoint in %s, serving export in %s" % (ckpt, exp), flush=True)
        return 0 if ok else 1


def main(argv):
    f = numpy_demo.parse_flags(argv)
    # One intra-op thread per rank: this model's tensors are small, and
    # torch's thread pool on a shared or busy core slows each op down ~3x
    # (measured on 2 cores: 2.1 s vs 6.1 s for the same 40 steps).
    torch.set_num_threads(1)
    try:
        with hb.Context() as ctx:
            return Trainer(ctx, f).run()
    except hb.HbError as e:
        print("ctr_train_torch.py: %s" % e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
