#!/usr/bin/env python3
"""The demos' parameter-server modes under SIGKILL, with real processes:
examples/ctr_train under `hbrun -n 2 --ps 1 --max-restarts`, checked by the
ps tasks' own count of applied samples (the demo's "exactly once" line) and
its learned AUC (it exits 0 only when both hold).

  demo_kills.py HBRUN CTR_TRAIN MODE [--runs N] [--seed S] [--work DIR]
                [--python DEMO.py]

MODE:
  worker  dynamic splits (--splits): a random worker is SIGKILLed at a
          random moment mid-training, twice per run; hbrun restarts it
          alone; every train sample is applied exactly once.
  ps      job checkpoints (--checkpoint-dir, every 25 steps, no splits: the
          demo's collective checkpoints need every worker at one step):
          ps task 0 is SIGKILLed once a checkpoint is committed; hbrun
          restarts the whole job, which resumes from it; every worker's
          steps are applied exactly once.
  join    dynamic splits with 2 workers; once under way `hbrun --join`
          adds a third (rank 2), which is SIGKILLed at a random moment and
          restarted by the joining hbrun (--max-restarts): it rejoins,
          trains, and every train sample is applied exactly once.

--python DEMO.py: mode worker with the numpy demo (examples/ctr_train_py,
run by this interpreter; hb on PYTHONPATH) instead of CTR_TRAIN; it prints
the same "exactly once" line.

--runs N (default 1) repeats the run N times (the campaign by hand:
tests/ps/demo_kills.sh). The seed (printed; --seed to repeat a failure)
draws the kill moments and the workers.
"""
import argparse
import glob
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "launcher"))
import hbrun_job  # noqa: E402

# ~2-4 s of training per start on a loaded 2-core machine: long enough to
# be killed mid-training, short enough for CI.
TRAIN = ["--train-samples", "96000", "--eval-samples", "8000", "--batch",
         "128", "--vocab", "1024", "--eval-every", "100000", "--log-every",
         "10"]


JOB = None  # the running job, for its output when a check fails


def fail(msg):
    if JOB is not None and not JOB.echo:
        print("---- the job's output\n" + "\n".join(JOB.lines), flush=True)
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def start(args, cmd):
    global JOB
    JOB = hbrun_job.Job(cmd, dict(os.environ), echo=args.verbose)
    return JOB


def role(pid):
    """'ps:<i>', the worker's rank as a string, or None."""
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
    except OSError:
        return None
    if env.get(b"HB_TASK_TYPE") == b"ps":
        return "ps:" + env.get(b"HB_TASK_ID", b"?").decode()
    r = env.get(b"HB_RANK")
    return r.decode() if r is not None else None


def find(job, who, timeout=30):
    """The pid of hbrun's child `who` ('ps:0', '1'), waiting for it."""
    end = time.time() + timeout
    while time.time() < end:
        for pid in job.workers():
            if role(pid) == who:
                return pid
        time.sleep(0.05)
    fail("no process %s under hbrun" % who)


def check_end(job, timeout, restarts):
    try:
        rc = job.wait(timeout)
    except TimeoutError:
        fail("hbrun did not finish within %d s" % timeout)
    out = "\n".join(job.lines)
    if rc != 0:
        fail("the job exited with %d" % rc)
    m = re.search(r"exactly once: the ps applied (\d+) samples of (\d+) expected: (\w+)", out)
    if not m or m.group(3) != "OK":
        fail("no exactly-once verdict, or a wrong count: %s" % (m.group(0) if m else "no line"))
    auc = re.search(r"held-out exact AUC ([0-9.]+) vs planted model ([0-9.]+).*: OK", out)
    if not auc:
        fail("the AUC was not learned")
    for pattern in restarts:
        if not re.search(pattern, out):
            fail("no line matching '%s'" % pattern)
    print("run ok: %s samples applied once each, AUC %s (planted %s)"
          % (m.group(1), auc.group(1), auc.group(2)), flush=True)


def run_worker(args, rng, work):
    demo = [sys.executable, args.python, "--lr", "0.2"] if args.python else [args.ctr_train]
    # The numpy demo kills by the clock (it reports no steps in ps mode):
    # 4x the samples (~4 s quiet), so both kills land mid-training.
    more = ["--train-samples", "384000"] if args.python else []
    cmd = [args.hbrun, "-n", "2", "--ps", "1", "--max-restarts", "4",
           "--timeout", "100", "--"] + demo + ["--splits"] + TRAIN + more + \
          ["--out", os.path.join(work, "out")]
    job = start(args, cmd)
    since = job.wait_line(r"parameter-server mode", 0, 60)
    if since is None:
        fail("the job did not start")
    for k in range(2):
        if args.python:  # it reports no steps in ps mode
            time.sleep(rng.uniform(0.3, 1.0))
            if job.p.poll() is not None:
                fail("the job ended before kill %d" % (k + 1))
        else:
            # A random moment between two step reports of the chief.
            if job.wait_line(r"\] step +\d+", since, 60) is None:
                fail("the job ended before kill %d" % (k + 1))
            time.sleep(rng.uniform(0.0, 0.4))
        rank = str(rng.randrange(2))
        pid = find(job, rank)
        print("kill %d: SIGKILL worker %s (pid %d)" % (k + 1, rank, pid), flush=True)
        os.kill(pid, signal.SIGKILL)
        line = job.wait_line(r"rank %s was killed by signal 9.*restarting it" % rank, since, 30)
        if line is None:
            fail("hbrun did not restart worker %s" % rank)
        since = line + 1
    check_end(job, 120, [])


def run_join(args, rng, work):
    env = dict(os.environ, HB_JOB_DIR=work)
    demo = [args.ctr_train, "--splits"] + TRAIN + ["--train-samples", "192000"]
    global JOB
    job = JOB = hbrun_job.Job(
        [args.hbrun, "-n", "2", "--ps", "1", "--timeout", "100", "-v", "--"] +
        demo + ["--out", os.path.join(work, "out")], env, echo=args.verbose)
    at = job.wait_line(r"hbrun: job (\d+) \(add workers", 0, 60)
    if at is None or job.wait_line(r"\] step +\d+", at, 60) is None:
        fail("the job did not start")
    job_id = re.search(r"job (\d+)", job.lines[at]).group(1)
    joiner = hbrun_job.Job(
        [args.hbrun, "--join", job_id, "--max-restarts", "1", "--timeout", "100",
         "--"] + demo + ["--out", os.path.join(work, "out2")], env, echo=True)
    if job.wait_line(r"worker rank 2 joins", at, 60) is None:
        fail("the ps task did not admit rank 2")
    time.sleep(rng.uniform(0.1, 0.5))
    pid = find(joiner, "2")
    print("SIGKILL the joined worker (pid %d)" % pid, flush=True)
    os.kill(pid, signal.SIGKILL)
    if joiner.wait_line(r"rank 2 was killed by signal 9.*restarting it", 0, 30) is None:
        fail("the joining hbrun did not restart its worker")
    try:
        rc = joiner.wait(120)
    except TimeoutError:
        fail("the joining hbrun did not finish")
    if rc != 0:
        fail("the joining hbrun exited with %d" % rc)
    m = [l for l in joiner.lines if re.search(r"\[2\] worker 2: \d+ steps, [1-9]\d* samples", l)]
    if not m:
        fail("the restarted joined worker trained no sample")
    check_end(job, 120, [])


def run_ps(args, rng, work):
    ckpt = os.path.join(work, "ck")
    # Two thirds of the samples and a checkpoint every 25 steps: each
    # save takes ~0.4 s here.
    cmd = [args.hbrun, "-n", "2", "--ps", "1", "--max-restarts", "4",
           "--timeout", "100", "--", args.ctr_train] + TRAIN + \
          ["--train-samples", "64000", "--checkpoint-dir", ckpt,
           "--checkpoint-every", "25", "--out", os.path.join(work, "out")]
    job = start(args, cmd)
    # After the first to the third checkpoint (of 250 steps, one every 25).
    want = rng.randrange(1, 4)
    end = time.time() + 60
    while len(glob.glob(os.path.join(ckpt, "*", "MANIFEST"))) < want:
        if time.time() > end or job.p.poll() is not None:
            fail("no %d checkpoints to kill after" % want)
        time.sleep(0.02)
    pid = find(job, "ps:0")
    print("SIGKILL ps task 0 (pid %d) after %d checkpoint(s)" % (pid, want), flush=True)
    os.kill(pid, signal.SIGKILL)
    check_end(job, 120, [r"restarting the job \(restart \d of 4\) after rank ps:0",
                         r"resumed from the checkpoint of step [1-9]"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hbrun")
    ap.add_argument("ctr_train")
    ap.add_argument("mode", choices=["worker", "ps", "join"])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--work", default=None)
    ap.add_argument("--python", default=None)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    if args.python and args.mode != "worker":
        ap.error("--python: mode worker only")
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    print("seed %d (--seed %d repeats it)" % (seed, seed), flush=True)
    rng = random.Random(seed)
    base = args.work or tempfile.mkdtemp(prefix="demo_kills_")
    t0 = time.time()
    for i in range(args.runs):
        work = os.path.join(base, "run%d" % i)
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        print("run %d of %d (%s)" % (i + 1, args.runs, args.mode), flush=True)
        {"worker": run_worker, "ps": run_ps, "join": run_join}[args.mode](args, rng, work)
    if args.work is None:
        shutil.rmtree(base, ignore_errors=True)
    print("PASSED: %d run(s) of %s in %.1f s" % (args.runs, args.mode, time.time() - t0))


if __name__ == "__main__":
    main()
