"""A Python program using hb from an installed tree.

python3 -I consumer.py SITE PREFIX: with SITE (the installed site
directory) as the only addition to sys.path, checks that `import hb` came
from PREFIX (the package, its extension and the libhb.so.0 it loaded), runs
a world-of-one allreduce, then two ranks through `python -m hb.run` (the
installed hbrun). consumer.py SITE --rank: one of those ranks.
"""
import os
import subprocess
import sys

sys.path.insert(0, sys.argv[1])

import numpy as np  # noqa: E402

import hb  # noqa: E402
import hb.run  # noqa: E402


def loaded_libhb():
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "libhb.so" in line}
    return sorted(paths)


def rank_main():
    with hb.Context() as ctx:
        x = ctx.allreduce(np.full(4, ctx.rank + 1, np.float32))
        expected = ctx.world_size * (ctx.world_size + 1) / 2
        assert (x == expected).all(), x
        print(f"consumer rank {ctx.rank}/{ctx.world_size} ok")


def main(site, prefix):
    prefix = os.path.realpath(prefix)
    inside = lambda p: os.path.realpath(p).startswith(prefix + os.sep)
    assert inside(hb.__file__), f"hb imported from {hb.__file__}, not {prefix}"
    assert inside(hb.capi._capi.__file__), hb.capi._capi.__file__
    libs = loaded_libhb()
    assert libs and all(inside(p) for p in libs), f"libhb loaded from {libs}"
    with hb.Context() as ctx:
        x = ctx.allreduce(np.arange(4, dtype=np.float32))
        assert ctx.world_size == 1 and x.tolist() == [0, 1, 2, 3], x
    hbrun = hb.run.hbrun_path()
    assert hbrun and inside(hbrun), f"hbrun {hbrun} is not the installed one"
    # hb.run runs with the same sys.path as this program; so do the ranks.
    out = subprocess.run([sys.executable, "-I", "-c",
                          "import sys, runpy; sys.path.insert(0, sys.argv[1]); "
                          "sys.argv = sys.argv[1:]; runpy.run_module('hb.run', run_name='__main__')",
                          site, "-n", "2", "--timeout", "60", "--",
                          os.path.abspath(__file__), site, "--rank"],
                         check=True, stdout=subprocess.PIPE, text=True, timeout=90).stdout
    assert out.count("ok") == 2, out
    print(f"python consumer ok: hb {hb.__file__}, libhb {libs[0]}, hbrun {hbrun}")


if __name__ == "__main__":
    if sys.argv[2] == "--rank":
        rank_main()
    else:
        main(sys.argv[1], sys.argv[2])
