#!/usr/bin/env bash
# Parameter-server mode across two "hosts" (network namespaces joined by a
# veth pair, as tests/multihost does): a TF_CONFIG cluster with the chief
# and two ps tasks on host A (10.213.0.1) and two workers on host B
# (10.213.0.2); every task runs ps_train itself (no hbrun), reading its role
# from TF_CONFIG.
#   equal: collective mode (the same three workers, no ps) and ps mode at
#          staleness 0 give bit-equal tables;
#   kill:  worker 1 (host B) is SIGKILLed at a random moment and started
#          again by this script: the others never stall past the peer
#          timeout, every sample is applied exactly once;
#   stop:  worker 2 (host B) is SIGSTOPped past the peer timeout at
#          staleness 2: the others go on, every sample exactly once.
#   ckpt:  job checkpoints of the ps tables and a dense buffer, an
#          evaluator task on host B following them; ps task 0 is SIGKILLed
#          after the checkpoint of step 10, every other task fails by
#          itself, the script starts the cluster again and it resumes from
#          the last checkpoint: the same bits as an uninterrupted run, and
#          the evaluator (across both runs) logs every checkpoint once with
#          the values a single evaluator process computes afterwards.
# Needs root (ip netns); skips (exit 77) with the reason otherwise.
#   ps_netns.sh PS_TRAIN equal|kill|stop|ckpt
set -u
PS_TRAIN=$(realpath "$1") MODE=$2
skip() {
  echo "SKIP: $*"
  exit 77
}
. "$(dirname "$0")/../multihost/netns.sh"
why=$(netns_check) || skip "$why"

ADDR_A=10.213.0.1 ADDR_B=10.213.0.2
WORK=$(mktemp -d /tmp/hb_ps_netns.XXXXXX)
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  netns_destroy
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

netns_create "$ADDR_A" "$ADDR_B"
case $? in
  0) ;;
  2) skip "cannot create network namespaces here (ip netns add failed)" ;;
  *) echo "FAIL: setting up the namespaces and their veth pair failed"; exit 1 ;;
esac
cd "$WORK" || exit 1

# tf_config WITH_PS TYPE INDEX
tf_config() {
  local ps=""
  [ "$1" = 1 ] && ps=$(printf ',"ps":["%s:29500","%s:29501"]' "$ADDR_A" "$ADDR_A")
  printf '{"cluster":{"chief":["%s:29400"],"worker":["%s:29401","%s:29402"]%s},"task":{"type":"%s","index":%d}}' \
    "$ADDR_A" "$ADDR_B" "$ADDR_B" "$ps" "$2" "$3"
}

fail() {
  echo "FAIL: $*"
  for f in "$WORK"/*.log; do
    [ -f "$f" ] && sed "s#^#   $(basename "$f"): #" "$f" | tail -30
  done
  exit 1
}

# start HOST WITH_PS TYPE INDEX LOG -- args: one task in the background.
start() {
  local ns=$NETNS_A
  [ "$1" = B ] && ns=$NETNS_B
  local cfg
  cfg=$(tf_config "$2" "$3" "$4")
  ip netns exec "$ns" env TF_CONFIG="$cfg" "$PS_TRAIN" "${@:7}" >>"$5" 2>&1 &
  LAST=$!
  PIDS+=("$LAST")
}

# run_job WITH_PS -- args: the whole cluster; waits for every task. Sets
# CHIEF_RC to the chief's exit code, and fails on any other's.
run_job() {
  local with_ps=$1
  shift 2
  local pids=() names=()
  if [ "$with_ps" = 1 ]; then
    for i in 0 1; do
      start A 1 ps "$i" "ps$i.log" -- "$@"
      pids+=("$LAST") names+=("ps$i")
    done
  fi
  start A "$with_ps" chief 0 chief.log -- "$@"
  local chief=$LAST
  for i in 0 1; do
    start B "$with_ps" worker "$i" "worker$i.log" -- "$@"
    pids+=("$LAST") names+=("worker$i")
    eval "WORKER$i=$LAST"
  done
  wait "$chief"
  CHIEF_RC=$?
  for k in "${!pids[@]}"; do
    wait "${pids[$k]}" || fail "${names[$k]} exited with $?"
  done
}

export HB_TIMEOUT_MS=60000 HB_CONNECT_TIMEOUT_MS=20000
case $MODE in
  equal)
    export HB_STALENESS=0
    run_job 0 -- train coll --steps 25
    [ "$CHIEF_RC" = 0 ] || fail "collective run: chief exited with $CHIEF_RC"
    rm -f ./*.log
    run_job 1 -- train ps --steps 25 --max-lead 0
    [ "$CHIEF_RC" = 0 ] || fail "ps run: chief exited with $CHIEF_RC"
    "$PS_TRAIN" compare coll ps >compare.log 2>&1 || fail "compare"
    cat compare.log
    ;;
  kill | stop)
    export HB_PEER_TIMEOUT_MS=1000 HB_HEARTBEAT_INTERVAL_MS=100
    K=0 VICTIM=1 WORKER_INDEX=0
    [ "$MODE" = stop ] && K=2 VICTIM=2 WORKER_INDEX=1
    ARGS=(count count_ok --samples 3000 --batch 20 --step-ms 5 --pid-dir .
          --max-stall-ms 4000 --victim $VICTIM)
    (
      sleep "0.$((3 + RANDOM % 5))"
      pid=$(cat worker$VICTIM.pid 2>/dev/null)
      if [ "$MODE" = kill ]; then
        kill -KILL "$pid" && echo "test: SIGKILL worker rank $VICTIM" >>test.log
      else
        kill -STOP "$pid" && echo "test: SIGSTOP worker rank $VICTIM" >>test.log
        sleep 2.5
        kill -CONT "$pid"
      fi
    ) &
    killer=$!
    export HB_STALENESS=$K
    # The victim dies: this script is its restarter (hbrun's --max-restarts
    # is per machine).
    for i in 0 1; do start A 1 ps "$i" "ps$i.log" -- "${ARGS[@]}"; done
    ps0=${PIDS[-2]} ps1=${PIDS[-1]}
    start A 1 chief 0 chief.log -- "${ARGS[@]}"
    chief=$LAST
    for i in 0 1; do
      start B 1 worker "$i" "worker$i.log" -- "${ARGS[@]}"
      eval "W$i=$LAST"
    done
    wait "$killer"
    victim_pid=W$WORKER_INDEX
    if [ "$MODE" = kill ]; then
      wait "${!victim_pid}"
      echo "test: worker rank $VICTIM exited with $? (killed); starting it again" >>test.log
      HB_RESTART_COUNT=1 start B 1 worker "$WORKER_INDEX" \
        "worker$WORKER_INDEX.again.log" -- "${ARGS[@]}"
      eval "W$WORKER_INDEX=$LAST"
    fi
    wait "$chief" || fail "chief exited with $?"
    wait "$W0" || fail "worker 0 exited with $?"
    wait "$W1" || fail "worker 1 exited with $?"
    wait "$ps0" || fail "ps 0 exited with $?"
    wait "$ps1" || fail "ps 1 exited with $?"
    [ -f count_ok ] || fail "no exactly-once verdict"
    grep -q "0 not applied exactly once" chief.log || fail "counts"
    cat test.log chief.log
    ;;
  ckpt)
    export HB_STALENESS=0 HB_PEER_TIMEOUT_MS=2000 HB_HEARTBEAT_INTERVAL_MS=100
    run_job 1 -- train ref --steps 40 --ckpt ck-ref --ckpt-every 5
    [ "$CHIEF_RC" = 0 ] || fail "reference run: chief exited with $CHIEF_RC"
    rm -f ./*.log
    # The evaluator task (host B) follows ck through both runs of the job.
    start B 1 evaluator 0 evaluator.log -- evaluate ck eval.jsonl
    EV=$LAST
    ARGS=(train out --steps 40 --ckpt ck --ckpt-every 5 --step-ms 30
          --pid-dir .)
    for i in 0 1; do start A 1 ps "$i" "ps$i.log" -- "${ARGS[@]}"; done
    P0=${PIDS[-2]} P1=${PIDS[-1]}
    start A 1 chief 0 chief.log -- "${ARGS[@]}"
    C=$LAST
    for i in 0 1; do start B 1 worker "$i" "worker$i.log" -- "${ARGS[@]}"; done
    W0=${PIDS[-2]} W1=${PIDS[-1]}
    for _ in $(seq 600); do
      compgen -G 'ck/ckpt-000000000010-*/MANIFEST' >/dev/null && break
      sleep 0.05
    done
    kill -KILL "$P0" || fail "no ps task 0 to kill"
    echo "test: SIGKILL ps task 0 after the checkpoint of step 10" >>test.log
    # Every worker fails by itself (HB_ERR_PEER_FAILED), as a scheduler
    # sees it; the other ps task is stopped by the scheduler (this script).
    for w in "$C" "$W0" "$W1"; do
      wait "$w" && fail "a worker ended well without ps task 0"
    done
    kill -TERM "$P1" 2>/dev/null
    wait "$P1"
    grep -q "HB_ERR_PEER_FAILED" chief.log || fail "the chief did not see the ps fail"
    mkdir -p first && mv chief.log worker?.log ps?.log first/
    run_job 1 -- train out --steps 40 --ckpt ck --ckpt-every 5
    [ "$CHIEF_RC" = 0 ] || fail "restarted run: chief exited with $CHIEF_RC"
    grep -Eq "rank 0 starts at step (1[0-9]|[2-3][0-9])" chief.log ||
      fail "the restarted job did not resume from a checkpoint"
    wait "$EV" || fail "the evaluator exited with $?"
    "$PS_TRAIN" compare ref out >compare.log 2>&1 || fail "compare"
    cmp ref/w.bin out/w.bin || fail "the dense buffers differ"
    grep -q "evaluated steps: 5 10 15 20 25 30 35 40$" evaluator.log ||
      fail "the evaluator did not log every checkpoint once: $(cat evaluator.log)"
    # One evaluator process afterwards (no namespaces): the same values.
    TF_CONFIG='{"cluster":{"worker":["127.0.0.1:1"],"ps":["127.0.0.1:2"]},"task":{"type":"evaluator","index":0}}' \
      "$PS_TRAIN" evaluate ck again.jsonl >again.log 2>&1 || fail "evaluate again"
    strip() { sed 's/"time":[0-9.e+-]*,//' "$1"; }
    [ "$(strip eval.jsonl)" = "$(strip again.jsonl)" ] ||
      fail "the evaluator's values differ from a single evaluation afterwards"
    cat test.log compare.log evaluator.log
    ;;
  *)
    echo "unknown mode $MODE"
    exit 2
    ;;
esac
echo "PASSED: ps across two network namespaces ($MODE)"
