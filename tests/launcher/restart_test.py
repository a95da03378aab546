#!/usr/bin/env python3
"""Recovery end to end: the C++ CTR demo under `hbrun --max-restarts`, with
real processes and real kills, against an uninterrupted run.

  restart_test.py HBRUN CTR_TRAIN CRITEO_SYNTH_TSV MODE [--seed S]
                  [--program PYTHON DEMO.py]

MODE:
  chaos    3 ranks, asynchronous checkpoints; SIGKILLs a random rank at a
           random moment 3 times, and hbrun itself once (then starts hbrun
           again, as a scheduler would);
           the final digest (every table with its optimizer slots, the dense
           parameters and their slots, the metrics, the tally of trained
           samples) must equal the uninterrupted run's bit for bit.
  save-restore
           a rank kills itself at a random moment inside a checkpoint save,
           then another inside the restore of the restart; same check.
  shrink   4 ranks training from files (hb_reader); rank 3 is killed inside a
           save and cannot be started again (HB_TEST_FAIL_START), so the job
           goes on with 3 ranks (--min-nproc 3): every sample is trained
           exactly once (count and fingerprints equal the uninterrupted run's)
           and the final AUC is within 0.01 of the uninterrupted run's.

  torchrun 3 ranks started as torchrun's agent starts them (its variables,
           set by hand: Debian 12's torchrun fails at start), one rank
           killed and the others stopped twice, each start with the next
           TORCHELASTIC_RESTART_COUNT: the third start ends bit-identical
           to the uninterrupted hbrun run.

  python   the Python demo given by --program (examples/ctr_train_py or
           ctr_train_torch), 2 ranks, killed once: its final MLP state (and
           optimizer state) and AUC equal the uninterrupted run's bit for bit.

The seed (printed; --seed to repeat a failure) draws the kill moments and
ranks. Exit 0 on success; 1 with the reason otherwise.
"""
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hbrun_job  # noqa: E402

# Small enough for ~20 s on a loaded 2-core machine, long enough to be
# killed several times mid-training (small batches: many steps; the
# samples are split evenly over the ranks).
TRAIN = ["--train-samples", "48000", "--eval-samples", "4000", "--batch",
         "64", "--vocab", "1024", "--eval-every", "100000", "--log-every",
         "5", "--max-gap", "1", "--digest"]
EVERY = "8"  # steps between checkpoints


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


class Job(hbrun_job.Job):
    def __init__(self, cmd, env):
        super().__init__(cmd, env, echo=True)

    def wait(self, timeout):
        try:
            return super().wait(timeout)
        except TimeoutError:
            fail("hbrun did not finish within %d s" % timeout)


def digest(lines):
    d = [l.split("digest: ", 1)[1] for l in lines if "] digest: " in l]
    if not d:
        fail("no digest in the output")
    return d


def auc_of(d):
    return float(re.search(r"held_out_auc (\S+)", d[0]).group(1))


def run_plain(args, nproc, extra_env=None):
    env = dict(os.environ, **(extra_env or {}))
    job = Job([args.hbrun, "-n", str(nproc), "--"] + args.train, env)
    rc = job.wait(300)
    if rc != 0:
        fail("the uninterrupted run exited %d" % rc)
    return digest(job.lines)


def chaos(args, rng):
    ref = run_plain(args, 3)
    # Asynchronous saves here (the other modes save synchronously): a kill
    # may land while the background thread writes.
    cmd = [args.hbrun, "-n", "3", "--max-restarts", "10", "--"] + args.train + [
        "--checkpoint-dir", args.ckpt, "--checkpoint-every", EVERY,
        "--checkpoint-async"]
    env = dict(os.environ)
    kills = ["worker", "worker", "hbrun", "worker"]
    job = Job(cmd, env)
    since = 0
    lines = []
    for k, what in enumerate(kills):
        # Once this start has committed a checkpoint (asynchronous saves
        # commit some steps after they return), 0-2 log lines (5 steps
        # each) later, at a random moment within 0.3 s.
        i = job.wait_line(r"^\[0\] checkpoint: step \d+ committed", since, 120)
        if i is None:
            fail("the job ended before kill %d of %d: make it longer" %
                 (k + 1, len(kills)))
        since = i + 1
        for _ in range(rng.randint(0, 2)):
            i = job.wait_line(r"^\[0\] step ", since, 120)
            if i is None:
                fail("the job ended before kill %d of %d: make it longer" %
                     (k + 1, len(kills)))
            since = i + 1
        time.sleep(rng.uniform(0.0, 0.3))
        if what == "hbrun":
            print("kill %d: SIGKILL hbrun (pid %d)" % (k + 1, job.p.pid), flush=True)
            job.p.kill()
            job.wait(60)
            lines += job.lines
            job = Job(cmd, env)  # the scheduler starts it again
            since = 0
            continue
        pids = job.workers()
        if not pids:
            fail("kill %d: no workers to kill" % (k + 1))
        pid = rng.choice(sorted(pids))
        print("kill %d: SIGKILL worker pid %d" % (k + 1, pid), flush=True)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        i = job.wait_line(r"restarting the job", len(job.lines), 60)
        if i is None:
            fail("kill %d: hbrun did not restart the job" % (k + 1))
        since = i + 1
    rc = job.wait(300)
    if rc != 0:
        fail("the interrupted job exited %d" % rc)
    resumed = sum("] resumed from the checkpoint" in l for l in lines) + \
        resumes(job)
    if resumed < 3:
        fail("only %d of the 4 restarts resumed from a checkpoint" % resumed)
    compare(ref, digest(job.lines), exact=True)


def resumes(job):
    return sum("] resumed from the checkpoint" in l for l in job.lines)


def save_restore(args, rng):
    ref = run_plain(args, 3)
    # Past the first checkpoint, so that the restart has one to restore.
    step = rng.randrange(2, 5) * int(EVERY)
    kill = "save:%d:%d:30000,restore:%d:1:10000" % (
        rng.randrange(3), step, rng.randrange(3))
    print("CTR_TRAIN_TEST_KILL=" + kill, flush=True)
    cmd = [args.hbrun, "-n", "3", "--max-restarts", "3", "--"] + args.train + [
        "--checkpoint-dir", args.ckpt, "--checkpoint-every", EVERY]
    job = Job(cmd, dict(os.environ, CTR_TRAIN_TEST_KILL=kill))
    rc = job.wait(300)
    if rc != 0:
        fail("the interrupted job exited %d" % rc)
    n = sum("restarting the job" in l for l in job.lines)
    if n != 2:
        fail("expected 2 restarts (a kill in the save, one in the restore), "
             "saw %d" % n)
    # Restart 1 died inside its restore: rank 0 never got to say it resumed.
    starts = [i for i, l in enumerate(job.lines) if "restarting the job" in l]
    if any("] resumed from" in l for l in job.lines[starts[0]:starts[1]]):
        fail("the kill in the restore of restart 1 came after the restore")
    if resumes(job) != 1:
        fail("restart 2 did not resume from a checkpoint")
    compare(ref, digest(job.lines), exact=True)


def shrink(args, rng):
    data = os.path.join(args.tmp, "data")
    # The demo's generator with the model's seed: the held-out split (from
    # the generator) matches the files' samples.
    subprocess.run([args.synth, "--out", data, "--samples", "24000", "--files",
                    "12", "--vocab", "1024", "--seed", args.model_seed],
                   check=True,
                   stdout=subprocess.DEVNULL)
    args.train = args.train_base + ["--data", os.path.join(data, "part-*")]
    ref = run_plain(args, 4)
    # Past the first checkpoint, so that the 3 ranks have one to resume.
    step = rng.randrange(2, 5) * int(EVERY)
    kill = "save:3:%d:30000" % step
    print("CTR_TRAIN_TEST_KILL=" + kill, flush=True)
    cmd = [args.hbrun, "-n", "4", "--max-restarts", "2", "--min-nproc", "3",
           "--"] + args.train + ["--checkpoint-dir", args.ckpt,
                                 "--checkpoint-every", EVERY]
    job = Job(cmd, dict(os.environ, CTR_TRAIN_TEST_KILL=kill,
                        HB_TEST_FAIL_START="3"))
    rc = job.wait(300)
    if rc != 0:
        fail("the shrunk job exited %d" % rc)
    if not any("going on with 3 worker(s)" in l for l in job.lines):
        fail("the job did not go on with 3 workers")
    if not any(re.search(r"resumed from the checkpoint of step \d+ \(written "
                         r"by 4 ranks", l) for l in job.lines):
        fail("the 3 ranks did not resume from the 4 ranks' checkpoint")
    got = digest(job.lines)
    if got[1] != ref[1]:
        fail("samples trained: %s, uninterrupted: %s" % (got[1], ref[1]))
    count = int(re.search(r"trained samples (\d+)", got[1]).group(1))
    if count != 24000:
        fail("trained %d samples of 24000" % count)
    gap = abs(auc_of(got) - auc_of(ref))
    print("shrink: every sample trained once (%d); AUC %.5f vs %.5f "
          "uninterrupted (gap %.5f)" % (count, auc_of(got), auc_of(ref), gap))
    # 3 ranks train a different path from the resumed step on. The gap is
    # fixed by the (model seed, kill step) pair the seed draws; over all 21
    # pairs it measured 0.0001-0.0071 (model seed 2026 killed at the save
    # of step 32: 0.00708, which the former bound of 0.005 failed in about
    # one CI run of 21). Lost or repeated samples are caught exactly above.
    if gap > 0.01:
        fail("AUC gap %.5f > 0.01" % gap)


class AgentWorld:
    """torchrun's agent, by hand (Debian 12's torchrun fails at start): the
    workers of one start with torchrun's variables and no HB_* ones; rank 0
    serves hb's store at MASTER_PORT + 1."""

    def __init__(self, args, nproc, port, restart):
        self.procs = []
        self.lines = []
        for r in range(nproc):
            env = {k: v for k, v in os.environ.items()
                   if not k.startswith("HB_")}
            env.update(RANK=str(r), WORLD_SIZE=str(nproc), LOCAL_RANK=str(r),
                       LOCAL_WORLD_SIZE=str(nproc), GROUP_RANK="0",
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                       TORCHELASTIC_RESTART_COUNT=str(restart),
                       TORCHELASTIC_MAX_RESTARTS="3",
                       TORCHELASTIC_RUN_ID="restart_test",
                       HB_LOG_LEVEL="error")
            self.procs.append(subprocess.Popen(
                args.train + ["--checkpoint-dir", args.ckpt,
                              "--checkpoint-every", EVERY],
                env=env, stdout=subprocess.PIPE if r == 0 else
                subprocess.DEVNULL, stderr=subprocess.STDOUT, text=True))
        self.cond = threading.Condition()
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.procs[0].stdout:
            sys.stdout.write("  [0] " + line)
            with self.cond:
                self.lines.append("[0] " + line.rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def wait_committed(self, timeout):
        end = time.time() + timeout
        with self.cond:
            while not any("checkpoint: step" in l for l in self.lines):
                if self.procs[0].poll() is not None or time.time() > end:
                    return False
                self.cond.wait(0.05)
        return True

    def stop(self):
        """As the agent does once a worker failed: SIGTERM, then reap."""
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.t.join(5)

    def wait(self, timeout):
        codes = []
        for p in self.procs:
            try:
                codes.append(p.wait(timeout))
            except subprocess.TimeoutExpired:
                self.stop()
                fail("a worker did not finish within %d s" % timeout)
        self.t.join(5)
        return codes


def torchrun(args, rng):
    ref = run_plain(args, 3)
    port = hbrun_job.free_port(2, rng)
    for restart in range(3):
        world = AgentWorld(args, 3, port, restart)
        if restart == 2:
            break
        if not world.wait_committed(120):
            world.stop()
            fail("start %d ended before a checkpoint was committed" % restart)
        time.sleep(rng.uniform(0, 0.3))
        victim = rng.randrange(3)
        print("start %d: SIGKILL rank %d" % (restart, victim), flush=True)
        world.procs[victim].kill()
        world.stop()
    codes = world.wait(300)
    if codes != [0, 0, 0]:
        fail("the last start's workers exited %s" % codes)
    if not any("] resumed from the checkpoint" in l for l in world.lines):
        fail("the last start did not resume from a checkpoint")
    compare(ref, digest(world.lines), exact=True)


PY_TRAIN = ["--train-samples", "24000", "--eval-samples", "2000", "--batch",
            "128", "--vocab", "1024", "--lr", "0.2", "--eval-every", "1000",
            "--log-every", "5", "--max-gap", "1", "--digest"]


def python_demo(args, rng):
    """The Python demo (numpy or torch, --program) killed once under
    hbrun --max-restarts: its final dense state and AUC equal the
    uninterrupted run's bit for bit."""
    args.train = args.program + PY_TRAIN + ["--out", os.path.join(args.tmp, "out")]
    ref = run_plain(args, 2)
    cmd = [args.hbrun, "-n", "2", "--max-restarts", "2", "--"] + args.train + [
        "--checkpoint-dir", args.ckpt, "--checkpoint-every", "5"]
    job = Job(cmd, dict(os.environ))
    since = 0
    for _ in range(2):  # past the checkpoint of step 5
        i = job.wait_line(r"^\[0\] step ", since, 120)
        if i is None:
            fail("the job ended before the kill")
        since = i + 1
    # A moment within the next few steps (a step takes milliseconds here):
    # the kill must land before the job ends, or it tests nothing.
    time.sleep(rng.uniform(0, 0.05))
    pids = job.workers()
    if not pids or any("] digest: " in l for l in job.lines):
        fail("the job ended before the kill: make it longer")
    pid = rng.choice(sorted(pids))
    print("SIGKILL worker pid %d" % pid, flush=True)
    os.kill(pid, signal.SIGKILL)
    rc = job.wait(300)
    if rc != 0:
        fail("the interrupted job exited %d" % rc)
    if resumes(job) != 1:
        fail("the restart did not resume from a checkpoint")
    compare(ref, digest(job.lines), exact=True)


def compare(ref, got, exact):
    for a, b in zip(ref, got):
        print("uninterrupted: " + a)
        print("interrupted:   " + b)
    if ref != got:
        fail("the interrupted run's final state differs from the "
             "uninterrupted run's")
    print("bit-identical: every table, dense buffer, metric and the tally "
          "of trained samples", flush=True)


def main():
    if len(sys.argv) < 5:
        print(__doc__)
        return 2
    class A:
        pass
    args = A()
    args.hbrun, ctr, args.synth, mode = sys.argv[1:5]
    argv = sys.argv[5:]
    args.program = []
    if "--program" in argv:  # the rest: the Python demo's command
        args.program = argv[argv.index("--program") + 1:]
        argv = argv[:argv.index("--program")]
    seed = int(argv[1]) if len(argv) > 1 and argv[0] == "--seed" \
        else random.randrange(1 << 30)
    print("seed %d (repeat with --seed %d)" % (seed, seed), flush=True)
    rng = random.Random(seed)
    args.tmp = tempfile.mkdtemp(prefix="hb_restart_")
    try:
        args.ckpt = os.path.join(args.tmp, "ckpt")
        args.model_seed = str(2026 + seed % 7)
        args.train_base = [ctr] + TRAIN + ["--seed", args.model_seed,
                                           "--out", os.path.join(args.tmp, "out")]
        args.train = list(args.train_base)
        {"chaos": chaos, "save-restore": save_restore, "shrink": shrink,
         "torchrun": torchrun, "python": python_demo}[mode](args, rng)
    finally:
        shutil.rmtree(args.tmp, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
