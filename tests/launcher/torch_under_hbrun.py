"""One worker under hbrun: torch.distributed initialises from the variables
hbrun exports (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), as under
torchrun, and an hb context forms beside it in the same process (its own
store on another port). Exits 77 (skip) when torch is not installed.
Usage: hbrun -n N -- python3 torch_under_hbrun.py /path/to/libhb.so"""
import ctypes
import os
import sys

try:
    import torch
    import torch.distributed as dist
except ImportError as e:
    print(f"SKIP: torch is not importable ({e})")
    sys.exit(77)

HB_FLOAT32, HB_SUM = 0, 0

torch.set_num_threads(1)
dist.init_process_group("gloo")  # env://
rank, world = dist.get_rank(), dist.get_world_size()
assert rank == int(os.environ["HB_RANK"]), (rank, os.environ["HB_RANK"])
assert world == int(os.environ["HB_WORLD_SIZE"]), world
assert int(os.environ["LOCAL_RANK"]) == rank  # one machine
t = torch.tensor([float(rank)])
dist.all_reduce(t)
assert t.item() == world * (world - 1) / 2, t

hb = ctypes.CDLL(sys.argv[1])
hb.hb_last_error.restype = ctypes.c_char_p
ctx = ctypes.c_void_p()
st = hb.hb_context_create(None, ctypes.byref(ctx))
assert st == 0, hb.hb_last_error()
assert hb.hb_context_rank(ctx) == rank
assert hb.hb_context_world_size(ctx) == world
x = (ctypes.c_float * 1)(rank + 1)
st = hb.hb_allreduce(ctx, x, x, ctypes.c_size_t(1), HB_FLOAT32, HB_SUM)
assert st == 0, hb.hb_last_error()
assert x[0] == world * (world + 1) / 2, x[0]
hb.hb_context_destroy(ctx)
dist.barrier()
dist.destroy_process_group()
print(f"rank {rank}: torch.distributed and hb both formed a world of {world}")
