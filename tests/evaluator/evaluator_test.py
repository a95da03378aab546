#!/usr/bin/env python3
"""The evaluator end to end (docs/evaluator.md): the C++ CTR demo trains
under hbrun while an evaluator process follows its checkpoint directory.

  evaluator_test.py HBRUN CTR_TRAIN MODE

MODE:
  hbrun      `hbrun -n 2 --evaluator`: the evaluator's JSON log has exactly
             one line per checkpoint the job committed, in step order; its
             last AUC is the trainer's own final held-out AUC (2 ranks
             against the evaluator's 1: equal to the printed 4 decimals);
             the evaluator ends when training ends (hbrun exits 0); and an
             evaluator started afterwards by hand on the finished directory
             (one process, TF_CONFIG) writes the same lines, metric values
             bit for bit.
  tf_config  training under `hbrun -n 2` and, beside it, an evaluator task
             started by hand with TF_CONFIG (task type "evaluator"): the
             same checks; then the evaluator started again with its log
             left in place evaluates nothing twice (its log is unchanged).
  errors     an evaluator without --checkpoint-dir, and one following
             another job's directory, fail with a message naming the
             problem; hbrun --evaluator with a TF_CONFIG worker task is a
             usage error.

Exit 0 on success; 1 with the reason otherwise.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "launcher"))
import hbrun_job  # noqa: E402

# ~94 steps at 2 ranks, a checkpoint every 8: 12 checkpoints.
TRAIN = ["--train-samples", "24000", "--eval-samples", "4000", "--batch",
         "128", "--vocab", "1024", "--eval-every", "100000", "--log-every",
         "50", "--max-gap", "1"]
EVERY = "8"
TF_EVALUATOR = json.dumps({"cluster": {"worker": ["127.0.0.1:1"]},
                           "task": {"type": "evaluator", "index": 0}})


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def clean_env():
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("HB_") or k in ("TF_CONFIG", "RANK", "WORLD_SIZE"):
            del env[k]
    return env


def evaluator_env():
    env = clean_env()
    env["TF_CONFIG"] = TF_EVALUATOR
    return env


def read_log(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        text = f.read()
    if text and not text.endswith("\n"):
        fail("%s ends in half a line" % path)
    return [json.loads(line) for line in text.splitlines()]


def committed_steps(lines):
    steps = [int(m.group(1)) for l in lines
             for m in [re.search(r"^\[0\] checkpoint: step (\d+) committed", l)]
             if m]
    return sorted(set(steps))


def final_auc(lines):
    for l in lines:
        m = re.search(r"^\[0\] final: \d+ (steps|samples) .* held-out exact "
                      r"AUC ([0-9.]+)", l)
        if m:
            return float(m.group(2))
    fail("no final AUC in the trainer's output")


def check_log(log, steps, trainer_auc, who):
    entries = read_log(log)
    got = [e["step"] for e in entries]
    print("%s: %d line(s), steps %s; committed %s" % (who, len(got), got, steps))
    if got != steps:
        fail("%s: the log's steps %s are not the committed checkpoints %s"
             % (who, got, steps))
    for e in entries:
        if set(e) != {"step", "time", "auc", "planted_auc"}:
            fail("%s: unexpected fields in %s" % (who, e))
    if abs(entries[-1]["auc"] - trainer_auc) > 5.001e-5:
        fail("%s: AUC of the final checkpoint %.6f, the trainer's %.4f"
             % (who, entries[-1]["auc"], trainer_auc))
    times = [e["time"] for e in entries]
    if times != sorted(times):
        fail("%s: times go backwards: %s" % (who, times))
    return entries


def run(cmd, env, timeout=120):
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=timeout)
    return p.returncode, p.stdout


def evaluate_by_hand(ctr, d, log, env=None):
    """A single-process evaluator on the (finished) directory."""
    rc, out = run([ctr] + TRAIN + ["--checkpoint-dir", d, "--eval-log", log],
                  env or evaluator_env())
    if rc != 0:
        fail("the evaluator by hand exited %d:\n%s" % (rc, out))
    return out


def same_values(a, b, who):
    strip = [{k: v for k, v in e.items() if k != "time"} for e in a]
    other = [{k: v for k, v in e.items() if k != "time"} for e in b]
    if strip != other:
        fail("%s: %s\n  != %s" % (who, strip, other))


def hbrun_with_evaluator(hbrun, ctr, tmp, extra, who, by_hand_env):
    """Training and its evaluator under one hbrun (extra: more hbrun
    options); then one evaluator process by hand on the finished
    directory: the same checkpoints, the same values."""
    d, log = os.path.join(tmp, "ckpt"), os.path.join(tmp, "eval.jsonl")
    job = hbrun_job.Job([hbrun, "-n", "2"] + extra +
                        ["--evaluator", "--timeout", "150", "--", ctr] + TRAIN +
                        ["--checkpoint-dir", d, "--checkpoint-every", EVERY,
                         "--checkpoint-keep", "100", "--eval-log", log,
                         "--out", os.path.join(tmp, "out")], env=clean_env())
    rc = job.wait(170)
    if rc != 0:
        fail("hbrun exited %d:\n%s" % (rc, "\n".join(job.lines)))
    if not any(l.startswith("[evaluator] evaluator: training finished")
               for l in job.lines):
        fail("the evaluator did not say that training finished:\n%s"
             % "\n".join(job.lines))
    steps = committed_steps(job.lines)
    if len(steps) < 10:
        fail("only %d checkpoints committed" % len(steps))
    entries = check_log(log, steps, final_auc(job.lines), who)
    log2 = os.path.join(tmp, "again.jsonl")
    evaluate_by_hand(ctr, d, log2, by_hand_env)
    same_values(entries, read_log(log2), "the evaluator by hand")
    return job


def mode_hbrun(hbrun, ctr, tmp):
    hbrun_with_evaluator(hbrun, ctr, tmp, [], "hbrun --evaluator", None)


def mode_ps(hbrun, ctr, tmp):
    """Parameter-server training (tables and dense parameters on a ps task)
    followed by an evaluator: it reads the ps tables from the checkpoints;
    by hand, an evaluator task of a TF_CONFIG cluster with a ps task."""
    env = clean_env()
    env["TF_CONFIG"] = json.dumps({"cluster": {"worker": ["127.0.0.1:1"],
                                               "ps": ["127.0.0.1:2"]},
                                   "task": {"type": "evaluator", "index": 0}})
    job = hbrun_with_evaluator(hbrun, ctr, tmp, ["--ps", "1"],
                               "hbrun --ps --evaluator", env)
    if not any("parameter-server mode" in l for l in job.lines):
        fail("training did not run in parameter-server mode:\n%s"
             % "\n".join(job.lines))


def mode_tf_config(hbrun, ctr, tmp):
    d, log = os.path.join(tmp, "ckpt"), os.path.join(tmp, "eval.jsonl")
    ev = hbrun_job.Job([ctr] + TRAIN + ["--checkpoint-dir", d, "--eval-log",
                                        log], env=evaluator_env())
    job = hbrun_job.Job([hbrun, "-n", "2", "--timeout", "150", "--", ctr] +
                        TRAIN + ["--checkpoint-dir", d, "--checkpoint-every",
                                 EVERY, "--checkpoint-keep", "100", "--out",
                                 os.path.join(tmp, "out")], env=clean_env())
    rc = job.wait(170)
    if rc != 0:
        fail("hbrun exited %d:\n%s" % (rc, "\n".join(job.lines)))
    erc = ev.wait(60)  # it ends once training has finished
    if erc != 0:
        fail("the evaluator exited %d:\n%s" % (erc, "\n".join(ev.lines)))
    steps = committed_steps(job.lines)
    entries = check_log(log, steps, final_auc(job.lines), "TF_CONFIG evaluator")
    # Started again (as a restarted evaluator task would be): it goes on
    # after the last step of its log, so nothing is evaluated twice.
    with open(log) as f:
        before = f.read()
    out = evaluate_by_hand(ctr, d, log)
    with open(log) as f:
        if f.read() != before:
            fail("a restarted evaluator wrote lines again:\n" + out)
    if "0 checkpoint(s) evaluated" not in out:
        fail("a restarted evaluator evaluated something:\n" + out)
    print("restarted evaluator: nothing evaluated twice")
    del entries


def mode_errors(hbrun, ctr, tmp):
    rc, out = run([ctr] + TRAIN, evaluator_env())
    if rc != 2 or "needs --checkpoint-dir" not in out:
        fail("an evaluator without --checkpoint-dir: exit %d:\n%s" % (rc, out))
    print("no --checkpoint-dir: exit 2, " + out.strip().splitlines()[-1])
    # Another job's directory: a short training with another seed made it.
    d = os.path.join(tmp, "other")
    rc, out = run([ctr, "--train-samples", "2000", "--eval-samples", "100",
                   "--batch", "128", "--vocab", "1024", "--max-gap", "1",
                   "--seed", "99", "--checkpoint-dir", d, "--out",
                   os.path.join(tmp, "out")], clean_env())
    if rc != 0:
        fail("the other job failed (%d):\n%s" % (rc, out))
    rc, out = run([ctr] + TRAIN + ["--checkpoint-dir", d], evaluator_env())
    if rc != 1 or "holds the checkpoints of job 'ctr_train seed=99" not in out:
        fail("an evaluator on another job's directory: exit %d:\n%s"
             % (rc, out))
    print("another job's directory: exit 1, " + out.strip().splitlines()[-1])
    env = clean_env()
    env["TF_CONFIG"] = json.dumps({"cluster": {"worker": ["127.0.0.1:1"]},
                                   "task": {"type": "worker", "index": 0}})
    rc, out = run([hbrun, "-n", "1", "--evaluator", "--", ctr], env)
    if rc != 2 or "option --evaluator" not in out:
        fail("hbrun --evaluator with TF_CONFIG: exit %d:\n%s" % (rc, out))
    print("hbrun --evaluator with TF_CONFIG: exit 2")


def main():
    hbrun, ctr, mode = sys.argv[1:4]
    tmp = tempfile.mkdtemp(prefix="hb-evaluator-")
    try:
        {"hbrun": mode_hbrun, "ps": mode_ps, "tf_config": mode_tf_config,
         "errors": mode_errors}[mode](hbrun, ctr, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("PASS")


if __name__ == "__main__":
    main()
