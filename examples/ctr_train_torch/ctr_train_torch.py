"""End-to-end CTR training with PyTorch and hb.torch: the model and data of
examples/ctr_train (C++) and examples/ctr_train_py (numpy), same flags.

    python3 -m hb.run -n 4 -- ctr_train_torch.py [--device cpu|cuda] [--train-samples N] [--batch B] ...

criteo-synth samples (../ctr_train_py/synth_data.py) with a planted
logistic model. The model is an nn.Module: an hb.torch.EmbeddingCollection
of 26 sharded tables (one id per sample each) plus a wide table (26 ids per
sample, sum-pooled), and an MLP (nn.Linear, ReLU, nn.Linear) wrapped in
hb.torch.DistributedDataParallel. autograd does the backward pass; the
tables' Adagrad runs at the rank that owns each row, inside
loss.backward(); the MLP's gradients are summed over the ranks with hb's
bucketed allreduce and stepped by torch.optim.Adagrad. The loop is the
numpy demo's (its Trainer.run): with --files N ranks hold uneven shards
and hb's data_sync keeps them in step (a rank out of data runs empty
batches; by default the samples are split evenly);
every --eval-every steps the held-out split is scored with the exact AUC
(merged across ranks). One intra-op torch thread per rank. At the end: a checkpoint
(hb.torch.save: the MLP plus the tables), a serving export per table, and
the final AUC next to the planted model's AUC.

--checkpoint-dir D --checkpoint-every N (the numpy demo's flags): a
checkpoint of the whole job every N steps through hb.torch.Checkpoint (the
tables with their slots, the module's state_dict in place, the optimizer's
state_dict, the data position and the running metric); started again, the
job resumes from the newest one.

    hbrun -n 2 --ps 1 -- python3 ctr_train_torch.py --splits ...

Parameter-server mode with dynamic splits, the numpy demo's (its
Trainer.run_ps loop, docs/parameter-servers.md): the tables are
TableConfig(placement="ps") tables and the MLP an hb.torch.PsParameters
(one hb.PsDense, Adagrad applied on the ps tasks); each worker takes the
train samples in splits from ps task 0, a fast worker more, and commits
its position with its pushes (every sample exactly once). Host only.

--device cpu (default) keeps everything on the host. --device cuda puts
the tables (hb GPU tables) and the MLP on the GPU of each rank: hb's
context device, which is cuda:0 of the worker's own CUDA_VISIBLE_DEVICES
when hbrun starts one worker per GPU. The batches go to the device once
per step; the lookup and the update stay one collection call each (hb's
device collection, on torch's stream) and the MLP's gradients are summed
by NCCL. Without a CUDA build of torch, or a GPU that hb sees, --device
cuda stops with a message (exit status 2) instead of training on the host.
"""

import argparse
import functools

import os
import sys

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

    def __init__(self, ctx, f, device, placement="workers"):
        super().__init__()
        adagrad = dict(seed=f.seed, optimizer="adagrad", learning_rate=f.lr, initial_accumulator=0.1,
                       device="cuda" if device.type == "cuda" else "cpu", placement=placement)
        # Gradients arrive already divided by the global batch (see Trainer.step):
        # the tables sum them over the ranks, as the MLP's allreduce does.
        self.sparse = ht.EmbeddingCollection(ctx, [
            ht.TableConfig(name, f.dim, num_rows=f.vocab, initializer="normal", init_a=0.0, init_b=0.05,
                           **adagrad) for name in CAT
        ] + [ht.TableConfig("wide", 1, num_rows=f.vocab * T, initializer="zeros", **adagrad)],
            average_gradients=False)
        self.dim = f.dim
        n_in = T * f.dim + DENSE
        self.mlp = nn.Sequential(nn.Linear(n_in, f.hidden), nn.ReLU(), nn.Linear(f.hidden, 1))
        # The numpy demo's initial weights (the same as the C++ demo's).
        w1, b1, w2, b2 = numpy_demo.Dense(n_in, f.hidden, f.seed).params
        with torch.no_grad():
            for p, v in zip(self.mlp.parameters(), (w1, b1, w2.reshape(1, -1), b2)):
                p.copy_(torch.from_numpy(v))
        self.register_buffer("table_offsets", torch.arange(T, dtype=torch.int64) * f.vocab, persistent=False)
        self.to(device)

    def features(self, ids):
        """The jagged input of a batch of ids (n, T): feature t's n ids, one
        per sample, then the wide feature's 26 ids per sample. The ids on
        the tables' device; the lengths stay on the host (hb.torch reads
        them there)."""
        n = ids.shape[0]
        values = torch.cat([ids.t().reshape(-1), (ids + self.table_offsets).reshape(-1)])
        lengths = torch.cat([torch.ones(T * n, dtype=torch.int64), torch.full((n,), T, dtype=torch.int64)])
        return ht.KeyedJaggedTensor(CAT + ["wide"], values, lengths=lengths)

    def forward(self, ids, dense):
        # e.pooled: every feature's pooled rows side by side (CAT's, then
        # the wide one's), one matrix; split once rather than concatenating
        # 26 features.
        e = self.sparse(self.features(ids))
        cat, wide = e.pooled.split([T * self.dim, 1], dim=1)
        return self.mlp(torch.cat([cat, dense], dim=1)).squeeze(1) + wide.squeeze(1)  # logits


class Trainer(numpy_demo.Trainer):
    """The numpy demo's loop (data sync, logging, evaluation, final line)
    with this module, autograd and torch's optimizer for the model."""

    def __init__(self, ctx, f, device="cpu"):  # no super().__init__: it would build the numpy model
        self.ctx, self.f = ctx, f
        self.rank, self.world = ctx.rank, ctx.world_size
        self.ps = ctx.num_ps > 0  # parameter-server mode (--splits): the numpy demo's run_ps
        if self.ps and device == "cuda":
            raise hb.HbError(hb.ERR_UNSUPPORTED, "HB_ERR_UNSUPPORTED",
                             "--splits keeps the tables and the MLP on the ps tasks' hosts; pass --device cpu")
        self.gen = numpy_demo.make_generator(f)
        self.device = cuda_device(ctx) if device == "cuda" else torch.device("cpu")
        self.model = CtrModel(ctx, f, self.device, placement="ps" if self.ps else "workers")
        if self.ps:
            # The MLP on the ps tasks (the numpy demo's PsDense: the same
            # flat layout and initial values), Adagrad applied there; no
            # DDP, whose broadcast and allreduce would form the workers'
            # collective world.
            self.ddp = self.opt = None
            self.ps_mlp = ht.PsParameters(ctx, "mlp", self.model.mlp.parameters(), optimizer="adagrad",
                                          learning_rate=f.lr, initial_accumulator=0.1)
        else:
            self.ddp = ht.DistributedDataParallel(self.model, ctx, average_gradients=False)
            self.opt = torch.optim.Adagrad(self.ddp.parameters(), lr=f.lr, initial_accumulator_value=0.1,
                                           eps=0.0)
        self.shard_begin, self.shard_end = numpy_demo.plan_train_shard(f, self.world, self.rank)

    def prefetch_layout(self):
        return None, None  # forward reads the Samples' ids and dense, not the numpy step's arrays

    def forward(self, split, begin, end):
        """Evaluation: samples [begin, end) of split, no gradients."""
        s = self.samples(split, begin, end)
        with torch.no_grad():
            prob = torch.sigmoid(self.model(*self.inputs(s)))
        return dict(s=s, label=s.label, prob=prob.cpu().numpy())

    def inputs(self, s):
        """The ids and dense features of samples s on the model's device."""
        return torch.from_numpy(s.ids).to(self.device), torch.from_numpy(s.dense).to(self.device)

    def train_step(self, lo, hi):
        """One training step on samples [lo, hi) (maybe empty)."""
        s = self.samples(0, lo, hi)
        label = torch.from_numpy(s.label).to(self.device)
        logits = self.ddp(*self.inputs(s))
        loss_sum = nn.functional.binary_cross_entropy_with_logits(logits, label, reduction="sum")
        global_n = self.global_batch(hi - lo)  # the numpy demo's: from the shard plan
        self.opt.zero_grad()
        (loss_sum / global_n).backward()  # the tables step here; the MLP's gradients are summed
        self.opt.step()
        # This rank's loss sum: the numpy demo's loop sums the ranks' at each log line.
        return global_n, loss_sum.item(), s.label, torch.sigmoid(logits.detach()).cpu().numpy()

    def ps_step(self, split, offset, lo, hi):
        """--splits: one step on samples [lo, hi) with the ps tasks' model;
        the tables push inside backward, after the position's commit."""
        self.ps_pull()
        s = self.samples(0, lo, hi)
        loss_sum = nn.functional.binary_cross_entropy_with_logits(
            self.model(*self.inputs(s)), torch.from_numpy(s.label), reduction="sum")
        self.ctx.ps_split_commit(split, offset)  # rides with this step's pushes
        self.ps_mlp.zero_grad()
        # Divided by the full global batch, as the numpy demo's ps mode.
        (loss_sum / (self.f.batch * self.world)).backward()
        self.ps_mlp.push()

    def ps_pull(self):
        self.ps_mlp.pull()

    def named_tables(self):
        return list(self.model.sparse.tables.items())

    def close_model(self):
        self.model.sparse.close()
        self.ps_mlp.close()

    def open_checkpoint(self, running_auc):
        """hb.torch.Checkpoint of the model (tables, state_dict) and the
        optimizer, plus the numpy demo's position and metric."""
        f = self.f
        ck = ht.Checkpoint(self.ctx, self.ddp, self.opt, dir=f.checkpoint_dir, keep=f.checkpoint_keep,
                           async_write=f.checkpoint_async, job_id=self.job_id())
        self.register_position(ck.hb, running_auc)
        return ck

    def dense_digest(self):
        """FNV-1a of the MLP's parameters and Adagrad sums, in order."""
        h = 0xcbf29ce484222325
        tensors = list(self.model.mlp.state_dict().values())
        tensors += [self.opt.state[p]["sum"] for p in self.model.mlp.parameters() if p in self.opt.state]
        for t in tensors:
            for b in t.detach().cpu().contiguous().numpy().tobytes():
                h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
        return h

    def save(self, ckpt, exp):
        """Checkpoint (MLP + tables, loadable at any world size) and a serving export per table."""
        ht.save(ckpt, self.ddp, self.ctx, self.opt)
        if self.ctx.is_chief:
            os.makedirs(exp, exist_ok=True)
        self.ctx.barrier()
        for name, table in self.model.sparse.tables.items():
            table.export(os.path.join(exp, name + ".hbe"))

    def banner(self):
        return super().banner() + ", torch " + torch.__version__ + ", " + str(self.device)


def cuda_device(ctx):
    """torch's device for hb's context device (a GPU table's device)."""
    if not ctx.device.startswith("cuda:"):
        raise hb.HbError(hb.ERR_UNSUPPORTED, "HB_ERR_UNSUPPORTED",
                         "--device cuda: hb sees no CUDA device (context device %r; %s); pass --device cpu"
                         % (ctx.device, hb.build_info()))
    return torch.device("cuda", int(ctx.device[5:]))


def main(argv):
    # --device is this demo's own flag; the rest are the numpy demo's.
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cpu: everything on the host; cuda: the tables and the MLP on the rank's GPU")
    mine, rest = p.parse_known_args(argv)
    if "-h" in rest or "--help" in rest:  # the numpy demo's parser prints the rest and exits
        print(p.format_help().replace("usage: ", "ctr_train_torch.py's own flag: ", 1))
    if mine.device == "cuda" and not torch.cuda.is_available():
        print("%s: --device cuda, but this torch (%s) has no CUDA device available (a CPU-only build, or "
              "no GPU visible): pass --device cpu, or install a CUDA build of torch"
              % (os.path.basename(sys.argv[0]), torch.__version__), file=sys.stderr)
        return 2
    # One intra-op thread per rank: this model's tensors are small, and
    # torch's thread pool on a shared or busy core slows each op down ~3x
    # (measured on 2 cores: 2.1 s vs 6.1 s for the same 40 steps).
    torch.set_num_threads(1)
    return numpy_demo.main(rest, functools.partial(Trainer, device=mine.device))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
