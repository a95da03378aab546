"""hb.torch.PsParameters under hbrun -n 2 --ps 1 (HB_STALENESS=0): an MLP
whose parameters live on the ps task, pulled before each step and pushed
after backward, ends equal to plain PyTorch SGD on the whole global batch
(float rounding apart); a parameter without a gradient pushes zeros, and
bad parameters are refused with errors naming them."""

import sys

import numpy as np
import torch
import torch.nn.functional as F

import hb
import hb.torch as ht

G, STEPS = 8, 5  # global batch (even), steps


def mlp():
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))


def batch(step):
    rng = np.random.RandomState(100 + step)
    return torch.from_numpy(rng.randn(G, 3).astype(np.float32)), torch.from_numpy((rng.rand(G) < 0.5)
                                                                                   .astype(np.float32))


def main():
    torch.set_num_threads(1)
    with hb.Context() as ctx:
        if ctx.task_type == "ps":
            ctx.serve()
            return 0
        net = mlp()
        frozen = torch.nn.Parameter(torch.ones(2))  # never in the loss: no gradient, pushes zeros
        ps = ht.PsParameters(ctx, "mlp", list(net.parameters()) + [frozen], optimizer="sgd", learning_rate=0.1)
        per = G // ctx.world_size
        for step in range(STEPS):
            x, y = batch(step)
            ps.pull()
            ps.zero_grad()
            lo = ctx.rank * per
            loss = F.binary_cross_entropy_with_logits(net(x[lo:lo + per]).squeeze(1), y[lo:lo + per],
                                                      reduction="sum") / G
            loss.backward()
            ps.push()  # summed over the two workers' pushes: the global batch's gradient
        ps.pull()
        ref = mlp()
        opt = torch.optim.SGD(ref.parameters(), lr=0.1)
        for step in range(STEPS):
            x, y = batch(step)
            opt.zero_grad()
            F.binary_cross_entropy_with_logits(ref(x).squeeze(1), y).backward()
            opt.step()
        for (name, p), want in zip(net.named_parameters(), ref.parameters()):
            assert torch.allclose(p, want, rtol=1e-5, atol=1e-6), (name, p, want)
            assert not torch.equal(p, mlp().state_dict()[name]), name + ": did not train"
        assert torch.equal(frozen, torch.ones(2)), frozen
        for bad, needle in ((torch.nn.Parameter(torch.ones(2, dtype=torch.float64)), "float32 CPU"),
                            ("w", "expected a torch.Tensor")):
            try:
                ht.PsParameters(ctx, "bad", [bad])
                raise AssertionError("accepted %r" % (bad,))
            except hb.HbError as e:
                assert needle in str(e) and "params[0]" in str(e), e
        try:
            ht.PsParameters(ctx, "bad", [frozen], momentum=0.9)
            raise AssertionError("accepted momentum")
        except hb.HbError as e:
            assert "momentum" in str(e), e
        ps.close()
        print("torch_ps_dense_check: worker %d of %d matches plain PyTorch" % (ctx.rank, ctx.world_size))
    return 0


if __name__ == "__main__":
    sys.exit(main())
