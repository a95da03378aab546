#!/usr/bin/env python3
"""restart_bench: what a failure costs the C++ CTR demo under hbrun, and what
its checkpoints cost a training step. Prints two tables.

  restart_bench.py HBRUN CTR_TRAIN [--np 4] [--samples 480000] [--kills 5]
                   [--every 25] [--reps 3] [--dir DIR]

Time to recovery (one job, `hbrun --max-restarts`, a checkpoint every
--every steps): --kills times, once a checkpoint has been committed and a
random 0-1 s later, a random rank is SIGKILLed; per kill:

  detect+stop  kill -> hbrun's "restarting the job" line (the failure seen,
               the other ranks stopped and reaped, the store closed)
  restore      the demo's own measure of hb_checkpoint_restore_latest
  kill->train  kill -> the first training step after the resume completed
               (the demo prints its wall time): the issue's goal is < 5 s

Checkpoint overhead (the demo's own "steps in T s", without evaluation):
"none", "sync" and "async" (a checkpoint every --every steps) run
interleaved --reps times; medians. per save = (T - T_none) / saves; at one
checkpoint per minute of training the overhead is per save / 60 s.

The machine's speed drifts: compare rows of one run only.
"""
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "tests", "launcher"))
from hbrun_job import Job  # noqa: E402


def opt(name, default):
    if name in sys.argv:
        return type(default)(sys.argv[sys.argv.index(name) + 1])
    return default


def time_to_recovery(hbrun, train, np_, kills, every, d, rng):
    ckpt = os.path.join(d, "ttr")
    job = Job([hbrun, "-n", str(np_), "--max-restarts", str(kills), "--"] +
              train + ["--checkpoint-dir", ckpt, "--checkpoint-every",
                       str(every)])
    rows, since = [], 0
    for k in range(kills):
        i = job.wait_line(r"^\[0\] checkpoint: step \d+ committed", since)
        if i is None:
            sys.exit("the job ended after %d kills: give more --samples" % k)
        time.sleep(rng.uniform(0, 1))
        pids = job.workers()
        if not pids:
            sys.exit("the job ended after %d kills: give more --samples" % k)
        pid = rng.choice(pids)
        t_kill = time.time()
        os.kill(pid, signal.SIGKILL)
        r = res = tr = None
        r = job.wait_line(r"restarting the job", i + 1)
        if r is not None:
            res = job.wait_line(r"\] resumed from the checkpoint", r + 1)
        if res is not None:
            tr = job.wait_line(r"\] resumed: step \d+ done at wall time", res + 1)
        if tr is None:
            sys.exit("kill %d: the job did not resume" % (k + 1))
        restore_s = float(re.search(r" in ([0-9.]+) s:", job.lines[res]).group(1))
        trained = float(job.lines[tr].rsplit(" ", 1)[1])
        rows.append((job.times[r] - t_kill, restore_s, trained - t_kill))
        since = tr + 1
    job.p.wait()
    return rows


def train_seconds(hbrun, train, np_, extra):
    out = subprocess.run([hbrun, "-n", str(np_), "--"] + train + extra,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    m = re.search(r"final: (\d+) steps in ([0-9.]+) s", out.stdout)
    if out.returncode != 0 or not m:
        sys.exit("the demo failed:\n" + out.stdout[-3000:])
    blocked = [float(x) for x in
               re.findall(r"the save blocked training ([0-9.]+) ms", out.stdout)]
    return int(m.group(1)), float(m.group(2)), blocked


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    hbrun, ctr = sys.argv[1], sys.argv[2]
    np_, samples = opt("--np", 4), opt("--samples", 480000)
    kills, every, reps = opt("--kills", 5), opt("--every", 25), opt("--reps", 3)
    d = tempfile.mkdtemp(prefix="hb_restart_bench_", dir=opt("--dir", "/tmp"))
    rng = random.Random(opt("--seed", 1))
    train = [ctr, "--train-samples", str(samples), "--eval-every", "1000000",
             "--max-gap", "1", "--out", os.path.join(d, "out")]
    try:
        rows = time_to_recovery(hbrun, train, np_, kills, every, d, rng)
        print("\nTime to recovery: ctr_train, %d ranks, %d samples, one "
              "checkpoint every %d steps (%d kills)\n" % (np_, samples, every,
                                                          kills))
        print("| kill | detect+stop s | restore s | kill->train s |")
        print("| --- | --- | --- | --- |")
        for k, (a, b, c) in enumerate(rows):
            print("| %d | %.3f | %.3f | %.3f |" % (k + 1, a, b, c))
        med = [statistics.median(x) for x in zip(*rows)]
        print("| median | %.3f | %.3f | %.3f |" % tuple(med))

        modes = {"none": [], "sync": ["--checkpoint-every", str(every)],
                 "async": ["--checkpoint-every", str(every),
                           "--checkpoint-async"]}
        res = {m: [] for m in modes}
        for r in range(reps):
            for m, extra in modes.items():
                c = os.path.join(d, "ovh-%s-%d" % (m, r))
                if m != "none":
                    extra = extra + ["--checkpoint-dir", c]
                res[m].append(train_seconds(hbrun, train, np_, extra))
                shutil.rmtree(c, ignore_errors=True)
        print("\nCheckpoint overhead: ctr_train, %d ranks, %d samples, "
              "medians of %d interleaved runs\n" % (np_, samples, reps))
        print("| mode | steps | train s | step ms | saves | per save ms | "
              "blocked ms (rank 0) | overhead at 1 per %d steps | at 1 per "
              "minute |" % every)
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        t_none = statistics.median(t for _, t, _ in res["none"])
        for m in modes:
            steps = res[m][0][0]
            t = statistics.median(x for _, x, _ in res[m])
            saves = steps // every if m != "none" else 0
            blocked = [b for _, _, bl in res[m] for b in bl]
            if saves:
                per = (t - t_none) / saves
                print("| %s | %d | %.2f | %.3f | %d | %.1f | %.1f | %.1f %% | "
                      "%.2f %% |" % (m, steps, t, 1e3 * t / steps, saves,
                                     1e3 * per,
                                     statistics.median(blocked) if blocked
                                     else 0, 100 * (t - t_none) / t_none,
                                     100 * per / 60))
            else:
                print("| none | %d | %.2f | %.3f | 0 | | | | |" %
                      (steps, t, 1e3 * t / steps))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
