#!/bin/bash
# ctr_splitckpt.sh HBRUN CTR_TRAIN WORK W [ps|worker]
#
# examples/ctr_train --splits with job checkpoints (hb_ps_split_try: a
# worker the queue has nothing for makes an empty step, so every worker
# reaches every collective save): W workers and a ps task under
# hbrun --max-restarts; the ps task (or, with "worker", the worker of rank
# W-1, which joined the workers' collective world for the saves) is
# SIGKILLed once the checkpoint of step 3 or later is committed; hbrun
# restarts the whole job, which resumes the tables and the split queue from
# the latest checkpoint. The job's sample counter (a ps table, checkpointed
# with the rest) must come to the train split exactly: a step applied twice
# or lost would show there; the demo exits 0 only when its held-out AUC is
# learned.
set -u
HBRUN=$1 CTR=$2 WORK=$3 W=$4 KILL=${5:-ps}
rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK" || exit 1
N=10000
fail() {
  echo "FAILED: $*"
  echo "---- log"
  cat log.txt
  exit 1
}
# hbrun's child whose environment has the line $2 (HB_TASK_TYPE=ps: the ps
# task).
child_with() {
  local c
  for c in $(pgrep -P "$1"); do
    tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx "$2" &&
      echo "$c" && return
  done
}
HB_STALENESS=4 HB_STALENESS_BOUND=age "$HBRUN" -n "$W" --ps 1 --max-restarts 3 \
  --timeout 60 -- "$CTR" --splits --train-samples $N --eval-samples 2000 \
  --batch 256 --vocab 1024 --lr 0.2 --max-gap 0.3 --log-every 1000 \
  --checkpoint-dir ck --checkpoint-every 3 --out out >log.txt 2>&1 &
JOB=$!
for _ in $(seq 1200); do
  compgen -G "ck/ckpt-*/MANIFEST" >/dev/null && break
  kill -0 $JOB 2>/dev/null || break
  sleep 0.05
done
compgen -G "ck/ckpt-*/MANIFEST" >/dev/null || fail "no checkpoint committed"
case $KILL in
ps) WHO="ps task" LABEL=ps:0 VAR=HB_TASK_TYPE=ps ;;
worker) WHO="worker" LABEL=$((W - 1)) VAR=HB_RANK=$((W - 1)) ;;
*) fail "unknown kill mode $KILL" ;;
esac
PID=$(child_with $JOB $VAR)
[ -n "$PID" ] || fail "no $WHO to kill"
echo "test: SIGKILL $WHO $PID after $(ls -d ck/ckpt-* | head -1)" >>log.txt
kill -KILL "$PID"
wait $JOB
rc=$?
[ $rc = 0 ] || fail "the job exited with $rc"
# A worker may see the ps task die (and exit) before hbrun does, and be
# restarted alone first; a worker killed in the collective world restarts
# the job, not itself alone (which could not join the broken world).
grep -Eq "restarting the job \(restart [1-3] of 3\) after rank $LABEL" log.txt ||
  fail "hbrun did not restart the job after the $WHO died"
grep -q "resumed from the checkpoint of step" log.txt ||
  fail "the restarted job did not resume from a checkpoint"
grep -q "empty steps (hb_ps_split_try had no split for it)" log.txt ||
  fail "no worker made an empty step (hb_ps_split_try never said later)"
grep -Eq "final: $N samples in" log.txt ||
  fail "the job's sample counter is not $N: $(grep 'final:' log.txt)"
echo "OK: killed $WHO: the job resumed from a checkpoint, $N samples applied once"
