#!/usr/bin/env python3
"""What exact gradient sums would cost relative to the CTR demo's step.

For each world size W, three interleaved rounds of: the demo
(examples/ctr_train under hbrun -n W) at two lengths, whose CPU-time
difference per step and rank is the step's cost without the setup, then
exact_apply --world W (the apply path's summation, float32 vs exact). CPU
time, since this machine is shared and its wall time drifts; medians of 3.

    bench/exact_apply/measure.py BUILD_DIR [WORLDS...]   (default worlds: 1 2)
"""

import os
import re
import resource
import statistics
import subprocess
import sys

build = os.path.abspath(sys.argv[1])
worlds = [int(w) for w in sys.argv[2:]] or [1, 2]
hbrun = os.path.join(build, "src/launcher/hbrun")
demo = os.path.join(build, "examples/ctr_train/ctr_train")
bench = os.path.join(build, "bench/exact_apply/exact_apply")
BATCH, SHORT, LONG = 512, 60, 260  # steps of the global batch


def cpu_of(cmd):
    """CPU seconds (user + sys) of cmd and the processes it waited for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   cwd="/tmp")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def demo_cpu(world, steps):
    out = "/tmp/exact_apply_demo_%d" % os.getpid()
    return cpu_of([hbrun, "-n", str(world), "--", demo, "--train-samples", str(steps * BATCH * world),
                   "--eval-samples", "512", "--batch", str(BATCH), "--out", out])


print("| world | demo CPU ms/step/rank | float32 sums | exact sums | exact - float | of the step |")
print("|---|---|---|---|---|---|")
for w in worlds:
    step, fl, ex = [], [], []
    for _ in range(3):
        d = (demo_cpu(w, LONG) - demo_cpu(w, SHORT)) / (LONG - SHORT) / w * 1e3
        text = subprocess.run([bench, "--world", str(w), "--batch", str(BATCH), "--steps", "40", "--reps", "1"],
                              check=True, capture_output=True, text=True).stdout
        f, e = map(float, re.search(r"\| summation, CPU ms \| ([\d.]+) \| ([\d.]+) \|", text).groups())
        step.append(d), fl.append(f), ex.append(e)
    s, f, e = statistics.median(step), statistics.median(fl), statistics.median(ex)
    print("| %d | %.2f | %.3f | %.3f | %.3f | %.0f%% |" % (w, s, f, e, e - f, 100 * (e - f) / s))
