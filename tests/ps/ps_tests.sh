#!/bin/bash
# Parameter-server mode with real processes (ps_train under hbrun --ps).
#
#   ps_tests.sh HBRUN PS_TRAIN WORKDIR equal W P
#       Collective mode and ps mode (staleness 0) on the same batches: the
#       tables are bit-equal (rows, and one more step through the slots),
#       their exports are the same files, a ps run whose steps go through
#       one collection of both tables gives them too, and the collective checkpoint
#       loaded into ps tables and saved again is the same table.
#       With a 6th argument `age`: the ps runs under staleness_bound=age
#       (staleness 0 is synchronous under either bound).
#   ps_tests.sh ... age W P K
#       The age bound K with a worker slow between its pull and its push:
#       nobody waits for it; its old pushes are applied scaled.
#   ps_tests.sh ... stale W P K
#       Staleness K with a slow worker: the ps tasks never let a push run
#       more than K steps ahead of the slowest live worker, and the others
#       do run K ahead.
#   ps_tests.sh ... dense W P
#       A dense buffer on the ps tasks equals SGD on the rank-order sums.
#   ps_tests.sh ... kill W P K
#       Worker 1, then worker 2 (if any) are SIGKILLed at random moments and
#       restarted (--max-restarts): the others never stall past the peer
#       timeout, the job finishes, every sample is applied exactly once.
#   ps_tests.sh ... killpoint W P K RUNS
#       Worker 1 SIGKILLs itself between two of its per-step pushes (two
#       tables, each pushed to every ps task: 2P requests per step; run i
#       kills after request i mod 2P, the last being between steps) at a
#       random step and is restarted: the job finishes (no wait outlasts
#       timeout_ms) and every sample of both tables is applied exactly once,
#       the rows equal to an uninterrupted run's, RUNS times.
#   ps_tests.sh ... splits W P K RUNS
#       Dynamic splits (2 epochs of 3000 samples, splits of 100), the chief
#       slowed: each run SIGKILLs worker 1 after one of its push requests
#       (to ps task i mod P) at a random step and restarts it; every sample
#       is applied exactly once per epoch. With K large and W >= 3 the
#       slowed chief takes fewer splits than worker W-1 (not killed).
#   ps_tests.sh ... splits_order
#       Dynamic splits' order is reproducible from the seed (see the case).
#   ps_tests.sh ... splitlost W P K RUNS
#       Dynamic splits, worker 1 SIGKILLs itself after one of its push
#       requests (to ps task i mod P) of a random step and is NOT
#       restarted: once connect_timeout_ms passed, ps task 0 gives its
#       split back at the queue's offset, another worker resumes it with a
#       first batch up to where the ps tables have it, and every sample is
#       applied exactly once per epoch (hbrun exits with the lost worker's
#       137).
#   ps_tests.sh ... stop W P K
#       Worker 1 is SIGSTOPped for longer than the peer timeout, then
#       resumed: the others go on meanwhile, every sample exactly once.
#   ps_tests.sh ... pause
#       Staleness 0 with worker 0 taking 4 s per step, so worker 1 waits in
#       its second pull; it is SIGSTOPped there for 2.5 s (peer timeout 1 s)
#       and resumed before its pull is answered: the ps loses it meanwhile,
#       and once resumed it is back and finishes (its own wait does not
#       count the time it was stopped as the ps's silence).
#   ps_tests.sh ... lost
#       A worker SIGKILLed without restarts: the other finishes, hbrun
#       stops the ps task and exits with the lost worker's status.
#   ps_tests.sh ... ckpt W P
#       Job checkpoints of ps tables and a dense buffer on the ps: ps task 0
#       is SIGKILLed after a few checkpoints; hbrun restarts the whole job,
#       which resumes from the latest checkpoint and ends with the same bits
#       (tables, slots, dense buffer) as a run that was not interrupted.
#   ps_tests.sh ... splitckpt W P RUNS
#       Dynamic splits with job checkpoints (the queue saved with the
#       tables): run i SIGKILLs ps task i mod P once a checkpoint of step
#       10 or later is committed (its step drawn at random); hbrun restarts
#       the job, which resumes the tables and the queue from the latest
#       checkpoint: every sample applied exactly once per epoch (without
#       the queue in the checkpoint, 800-900 samples are applied twice).
#       Through the public loop: hb_ps_split_try (never waits, so every
#       worker reaches every collective save), hb_ps_split_commit. Then an
#       evaluator reads the kept checkpoints: the queue's samples trained
#       (hb_evaluator_stats) equal what the table holds, in each.
#   ps_tests.sh ... join W P K
#       Elastic: dynamic splits with W workers and P ps tasks started by
#       hand (the HB_* variables hbrun would set), staleness K; once the
#       job is under way a worker of rank W (HB_WORLD_SIZE W + 1) starts:
#       the ps tasks admit it, it takes splits at once, and every sample is
#       applied exactly once per epoch.
#   ps_tests.sh ... hbrunjoin W P K
#       The same through hbrun: `hbrun -n W --ps P` runs the job (job file
#       in HB_JOB_DIR); once it is under way `hbrun --join <its pid>` adds
#       a worker: it gets rank W, the ps tasks admit it, it takes splits,
#       every sample is applied exactly once per epoch, and the job file is
#       gone after the job. Before and after the job, and for a stale file,
#       --join fails with exit 2 naming the job. With a 4th argument
#       `linger` the chief does not wait for the joiner and the joiner stays
#       attached 3 s after its last split: the job's hbrun must not stop the
#       ps tasks under it (they end when it leaves).
#   ps_tests.sh ... pskill W
#       The ps task is SIGKILLed mid-training: every worker fails with
#       HB_ERR_PEER_FAILED naming it.
set -u
HBRUN=$1 PS_TRAIN=$2 WORK=$3 MODE=$4
HBRUN_JOB=$(cd "$(dirname "$0")/../launcher" && pwd)/hbrun_job.py
shift 4
rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK" || exit 1
LOG=$WORK/log.txt

fail() {
  echo "FAILED: $*"
  echo "---- log"
  cat "$LOG"
  exit 1
}

# A loopback port free a moment ago, as hbrun picks them
# (tests/launcher/hbrun_job.py).
free_port() { python3 "$HBRUN_JOB"; }
# Random delay in ms, in [lo, hi).
rand_ms() { echo $(($1 + RANDOM % ($2 - $1))); }
sleep_ms() { sleep "$(awk -v m="$1" 'BEGIN { printf "%.3f", m / 1000 }')"; }

# Waits until the worker's pid file exists (its context is up); prints it.
worker_pid() {
  for _ in $(seq 200); do
    if [ -s "pids/worker$1.pid" ]; then
      cat "pids/worker$1.pid"
      return
    fi
    sleep 0.05
  done
}

# One run of a killed-and-restarted worker (killpoint, splits): the job
# ended well, worker 1 was killed at STEP and restarted, every sample was
# applied exactly once (the chief's verdict).
#   kill_run I STEP WHAT hbrun-args...
kill_run() {
  local i=$1 step=$2 what=$3
  shift 3
  mkdir -p "run$i"
  echo "test: run $i: worker 1 dies at step $step after push request $what" >>"$LOG"
  (cd "run$i" && "$HBRUN" "$@" >log.txt 2>&1)
  local rc=$?
  cat "run$i/log.txt" >>"$LOG"
  [ $rc = 0 ] || fail "run $i (kill after request $what of step $step): the job exited with $rc"
  grep -q "killing myself at step $step" "run$i/log.txt" || fail "run $i: no kill"
  grep -q "restarting it" "run$i/log.txt" || fail "run $i: no restart"
  grep -q " 0 not applied exactly once" "run$i/log.txt" || fail "run $i: counts"
  [ -f "run$i/count_ok" ] || fail "run $i: no exactly-once verdict"
}

case $MODE in
  equal)
    W=$1 P=$2
    export HB_STALENESS_BOUND=${3:-steps}
    HB_STALENESS=0 "$HBRUN" -n "$W" --timeout 60 -- "$PS_TRAIN" train coll \
      --steps 30 >"$LOG" 2>&1 || fail "collective run"
    HB_STALENESS=0 "$HBRUN" -n "$W" --ps "$P" --timeout 60 -- "$PS_TRAIN" \
      train ps --steps 30 --max-lead 0 >>"$LOG" 2>&1 || fail "ps run"
    "$PS_TRAIN" compare coll ps >>"$LOG" 2>&1 || fail "compare"
    # Through one collection (one pull and one push per ps task for both
    # tables): the same bits again.
    HB_STALENESS=0 "$HBRUN" -n "$W" --ps "$P" --timeout 60 -- "$PS_TRAIN" \
      train psc --steps 30 --collection >>"$LOG" 2>&1 || fail "ps run, collection"
    "$PS_TRAIN" compare coll psc >>"$LOG" 2>&1 || fail "compare collection"
    grep -q "max lead 0 (bound 0)" "$LOG" || fail "no staleness line"
    # The serving exports are the same files.
    for t in s8 d4; do
      cmp "coll/$t.hbe" "ps/$t.hbe" >>"$LOG" 2>&1 || fail "exports of $t differ"
    done
    # The collective checkpoint into ps tables and back out: the same rows.
    "$HBRUN" -n "$W" --ps "$P" --timeout 60 -- "$PS_TRAIN" reload coll back \
      >>"$LOG" 2>&1 || fail "reload into ps tables"
    "$PS_TRAIN" compare coll back >>"$LOG" 2>&1 || fail "compare after reload"
    ;;
  age)
    W=$1 P=$2 K=$3
    HB_STALENESS=$K HB_STALENESS_BOUND=${AGE_BOUND:-age} "$HBRUN" -n "$W" \
      --ps "$P" --timeout 60 -- "$PS_TRAIN" train ps --steps 40 --step-ms 5 \
      --slow-rank 1 --slow-ms 40 --slow-compute --expect-age "$K" \
      >"$LOG" 2>&1 || fail "age bound $K"
    grep -q "pushes scaled" "$LOG" || fail "no age line"
    ;;
  stale)
    W=$1 P=$2 K=$3
    HB_STALENESS=$K "$HBRUN" -n "$W" --ps "$P" --timeout 60 -- "$PS_TRAIN" \
      train ps --steps 40 --slow-rank 1 --slow-ms 25 --max-lead "$K" \
      --expect-lead >"$LOG" 2>&1 || fail "staleness $K"
    ;;
  dense)
    W=$1 P=$2
    HB_STALENESS=0 "$HBRUN" -n "$W" --ps "$P" --timeout 60 -- "$PS_TRAIN" \
      dense --steps 25 >"$LOG" 2>&1 || fail "dense"
    [ "$(grep -c 'equal to the reference' "$LOG")" = "$W" ] || fail "dense"
    ;;
  kill | stop)
    W=$1 P=$2 K=$3
    mkdir pids
    # Lost within 1 s; a step of the others may wait that long, plus load.
    export HB_PEER_TIMEOUT_MS=1000 HB_HEARTBEAT_INTERVAL_MS=100
    STALL=4000
    RESTARTS=()
    [ "$MODE" = kill ] && RESTARTS=(--max-restarts 2)
    HB_STALENESS=$K "$HBRUN" -n "$W" --ps "$P" "${RESTARTS[@]}" --timeout 80 \
      -- "$PS_TRAIN" count count_ok --samples 4000 --batch 20 --step-ms 5 \
      --pid-dir pids --max-stall-ms $STALL --victim 1 >"$LOG" 2>&1 &
    JOB=$!
    if [ "$MODE" = kill ]; then
      for victim in 1 2; do
        [ "$victim" -lt "$W" ] || break
        pid=$(worker_pid "$victim")
        [ -n "$pid" ] || fail "worker $victim never started"
        sleep_ms "$(rand_ms 200 900)"
        kill -KILL "$pid" 2>/dev/null
        echo "test: SIGKILL worker $victim (pid $pid)" >>"$LOG"
      done
    else
      pid=$(worker_pid 1)
      [ -n "$pid" ] || fail "worker 1 never started"
      sleep_ms "$(rand_ms 200 600)"
      kill -STOP "$pid"
      echo "test: SIGSTOP worker 1 (pid $pid) for 2.5 s" >>"$LOG"
      sleep 2.5
      kill -CONT "$pid"
    fi
    wait $JOB
    rc=$?
    [ $rc = 0 ] || fail "the job exited with $rc"
    [ -f count_ok ] || fail "no exactly-once verdict"
    grep -q "0 not applied exactly once" "$LOG" || fail "counts"
    if [ "$MODE" = kill ]; then
      grep -q "restarting it" "$LOG" || fail "no worker was restarted"
    else
      grep -q "rank 1 lost" "$LOG" || fail "the stopped worker was not lost"
    fi
    ;;
  killpoint)
    W=$1 P=$2 K=$3 RUNS=$4
    # A wait that cannot end fails the run in 8 s (not the ctest timeout).
    export HB_PEER_TIMEOUT_MS=1000 HB_HEARTBEAT_INTERVAL_MS=100 \
      HB_TIMEOUT_MS=8000 HB_STALENESS=$K
    for i in $(seq 0 $((RUNS - 1))); do
      J=$((i % (2 * P))) STEP=$((3 + RANDOM % 13))
      kill_run "$i" "$STEP" "$J" -n "$W" --ps "$P" --max-restarts 1 \
        --timeout 60 -- "$PS_TRAIN" count count_ok --samples 400 --batch 20 \
        --step-ms 2 --tables 2 --victim 1 --kill-after "$STEP:$J"
    done
    ;;
  splits)
    W=$1 P=$2 K=$3 RUNS=$4
    export HB_PEER_TIMEOUT_MS=1000 HB_HEARTBEAT_INTERVAL_MS=100 \
      HB_TIMEOUT_MS=8000 HB_STALENESS=$K HB_PS_SPLIT_SAMPLES=3000 \
      HB_PS_SPLIT_SIZE=100 HB_PS_SPLIT_EPOCHS=2 HB_PS_SPLIT_SEED=$RANDOM
    for i in $(seq 0 $((RUNS - 1))); do
      # Without a bound the other workers may leave worker 1 one split
      # only (5 steps): it dies inside its first. (3 ms a step: a split
      # lasts longer than the workers' start-up skew, so each gets one.)
      J=$((i % P)) STEP=$((1 + RANDOM % 4))
      [ "$K" -lt 100 ] && STEP=$((3 + RANDOM % 10))
      kill_run "$i" "$STEP" "$J" -n "$W" --ps "$P" --max-restarts 1 \
        --timeout 60 -- "$PS_TRAIN" splits count_ok --batch 20 --step-ms 3 \
        --slow-rank 0 --slow-ms 10 --victim 1 --kill-after "$STEP:$J"
      if [ "$K" -ge 100 ] && [ "$W" -ge 3 ]; then
        slow=$(sed -n 's/.*rank 0: took \([0-9]*\) splits.*/\1/p' "run$i/log.txt")
        fast=$(sed -n "s/.*rank $((W - 1)): took \([0-9]*\) splits.*/\1/p" "run$i/log.txt")
        [ "$slow" -lt "$fast" ] || fail "run $i: the slowed chief took $slow splits, worker $((W - 1)) $fast"
      fi
    done
    ;;
  splits_order)
    # Reproducible order: with nothing failing, the same seed hands out the
    # same splits in the same order (one worker sees the whole order), each
    # epoch a permutation of all splits; another seed, another order. With
    # 3 workers every split of every epoch is taken exactly once.
    export HB_PS_SPLIT_SAMPLES=3000 HB_PS_SPLIT_SIZE=100 HB_PS_SPLIT_EPOCHS=2
    n=0
    for args in "7 1" "7 1" "8 1" "7 3"; do
      set -- $args
      HB_PS_SPLIT_SEED=$1 "$HBRUN" -n "$2" --ps 1 --timeout 60 -- "$PS_TRAIN" \
        splits "ok$n" --batch 50 --print-splits >"order$n.log" 2>&1 ||
        fail "run $n (seed $1, $2 workers)"
      cat "order$n.log" >>"$LOG"
      sed -n 's/.*: split \([0-9]*\) epoch \([0-9]*\) from .*/\2 \1/p' \
        "order$n.log" >"order$n"
      [ "$(sort -u "order$n" | wc -l)" = 60 ] && [ "$(wc -l <"order$n")" = 60 ] ||
        fail "run $n: not every split of both epochs exactly once"
      n=$((n + 1))
    done
    cmp -s order0 order1 || fail "the same seed gave two orders"
    ! cmp -s order0 order2 || fail "seeds 7 and 8 gave the same order"
    [ "$(sort order0 | md5sum)" = "$(sort order3 | md5sum)" ] || fail "3 workers: other splits"
    ;;
  splitlost)
    W=$1 P=$2 K=$3 RUNS=$4
    export HB_PEER_TIMEOUT_MS=1000 HB_HEARTBEAT_INTERVAL_MS=100 \
      HB_TIMEOUT_MS=20000 HB_CONNECT_TIMEOUT_MS=4000 HB_STALENESS=$K \
      HB_PS_SPLIT_SAMPLES=2000 HB_PS_SPLIT_SIZE=100 HB_PS_SPLIT_EPOCHS=2 \
      HB_PS_SPLIT_SEED=$RANDOM
    for i in $(seq 0 $((RUNS - 1))); do
      J=$((i % P)) STEP=$((2 + RANDOM % 8))
      mkdir -p "run$i"
      echo "test: run $i: worker 1 dies at step $STEP after push request $J, for good" >>"$LOG"
      (cd "run$i" && "$HBRUN" -n "$W" --ps "$P" --timeout 60 -- "$PS_TRAIN" \
        splits count_ok --batch 20 --step-ms 3 --victim 1 --victim-lost \
        --kill-after "$STEP:$J" >log.txt 2>&1)
      rc=$?
      cat "run$i/log.txt" >>"$LOG"
      [ $rc = 137 ] || fail "run $i: hbrun exited with $rc, expected 137 (the lost worker's)"
      grep -q "killing myself at step $STEP" "run$i/log.txt" || fail "run $i: no kill"
      grep -q "goes back to the queue at sample" "run$i/log.txt" || fail "run $i: the split was not given back"
      grep -q "resumes split .* first batch to" "run$i/log.txt" || fail "run $i: nobody resumed the pushed batch"
      grep -q " 0 not applied exactly once" "run$i/log.txt" || fail "run $i: counts"
      [ -f "run$i/count_ok" ] || fail "run $i: no exactly-once verdict"
    done
    ;;
  lost)
    # Worker 1 is SIGKILLed and not restarted: worker 0 finishes without it
    # (its rounds complete once rank 1 is lost), and hbrun then stops the
    # ps task (which would wait connect_timeout_ms for a restart) and exits
    # with the lost worker's status.
    "$HBRUN" -n 2 --ps 1 --timeout 60 -- "$PS_TRAIN" train out --steps 400 \
      --slow-rank 1 --slow-ms 5 >"$LOG" 2>&1 &
    JOB=$!
    for _ in $(seq 100); do
      pid=$(pgrep -P "$JOB" -f "ps_train train" | while read -r c; do
        tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx HB_RANK=1 && echo "$c"
      done | head -n1)
      [ -n "$pid" ] && break
      sleep 0.05
    done
    [ -n "$pid" ] || fail "worker 1 never started"
    sleep 0.5
    kill -KILL "$pid"
    t0=$SECONDS
    wait $JOB
    rc=$?
    [ $rc = 137 ] || fail "hbrun exited with $rc, expected 137 (the lost worker's)"
    [ $((SECONDS - t0)) -le 15 ] || fail "the job took $((SECONDS - t0)) s to end"
    grep -q "the others go on without it" "$LOG" || fail "no 'go on' line"
    grep -q "no worker left: stopping 1 ps task" "$LOG" || fail "the ps task was not stopped"
    [ -f out/s8.manifest ] || fail "worker 0 did not finish (no checkpoint)"
    ;;
  pause)
    mkdir pids
    export HB_PEER_TIMEOUT_MS=1000 HB_HEARTBEAT_INTERVAL_MS=100 HB_STALENESS=0
    "$HBRUN" -n 2 --ps 1 --timeout 60 -- "$PS_TRAIN" train out --steps 2 \
      --slow-rank 0 --slow-ms 4000 --pid-dir pids >"$LOG" 2>&1 &
    JOB=$!
    pid=$(worker_pid 1)
    [ -n "$pid" ] || fail "worker 1 never started"
    sleep 0.5
    kill -STOP "$pid"
    echo "test: SIGSTOP worker 1 (pid $pid) for 2.5 s" >>"$LOG"
    sleep 2.5
    kill -CONT "$pid"
    wait $JOB || fail "the job exited with $?"
    grep -q "rank 1 lost" "$LOG" || fail "the stopped worker was not lost"
    grep -q "rank 1 is back" "$LOG" || fail "the stopped worker did not come back"
    ;;
  ckpt)
    W=$1 P=$2
    export HB_STALENESS=0
    "$HBRUN" -n "$W" --ps "$P" --timeout 60 -- "$PS_TRAIN" train ref \
      --steps 40 --ckpt ck-ref --ckpt-every 5 >"$LOG" 2>&1 || fail "reference"
    mkdir -p pids
    "$HBRUN" -n "$W" --ps "$P" --max-restarts 1 --timeout 60 -- "$PS_TRAIN" \
      train out --steps 40 --ckpt ck --ckpt-every 5 --step-ms 40 \
      --pid-dir pids >>"$LOG" 2>&1 &
    JOB=$!
    # Once the checkpoint of step 10 is committed (its MANIFEST: of 40
    # steps), ps task 0 dies.
    for _ in $(seq 600); do
      compgen -G 'ck/ckpt-000000000010-*/MANIFEST' >/dev/null && break
      sleep 0.05
    done
    kill -KILL "$(cat pids/ps0.pid)" || fail "no ps task to kill"
    wait $JOB || fail "the restarted job failed"
    grep -q "restarting the job (restart 1 of 1) after rank ps:0" "$LOG" ||
      fail "hbrun did not restart the job after the ps died"
    grep -Eq "rank 0 starts at step (1[0-9]|[2-3][0-9]) \(restart 1\)" \
      "$LOG" || fail "the restarted job did not resume from a checkpoint"
    "$PS_TRAIN" compare ref out >>"$LOG" 2>&1 || fail "compare"
    cmp ref/w.bin out/w.bin >>"$LOG" 2>&1 || fail "dense buffers differ"
    ;;
  splitckpt)
    W=$1 P=$2 RUNS=$3
    # The default peer timeout: nothing here is lost but the ps task, whose
    # connections close (a 1 s timeout lost loaded workers in 1 of 80 runs).
    export HB_STALENESS=0 HB_TIMEOUT_MS=20000 HB_PS_SPLIT_SAMPLES=2000 \
      HB_PS_SPLIT_SIZE=100 HB_PS_SPLIT_EPOCHS=2 HB_PS_SPLIT_SEED=$RANDOM
    for i in $(seq 0 $((RUNS - 1))); do
      PS=$((i % P)) AT=$((10 + 5 * (RANDOM % 3)))
      mkdir -p "run$i/pids"
      echo "test: run $i: SIGKILL ps task $PS after the checkpoint of step $AT" >>"$LOG"
      # Restarts to spare: a worker may see the ps task die (and exit)
      # before hbrun does, and be restarted alone first.
      (cd "run$i" && "$HBRUN" -n "$W" --ps "$P" --max-restarts 4 --timeout 60 \
        -- "$PS_TRAIN" splitckpt count_ok --ckpt ck --ckpt-every 5 --steps 60 \
        --batch 30 --step-ms 30 --pid-dir pids >log.txt 2>&1) &
      JOB=$!
      for _ in $(seq 600); do
        compgen -G "run$i/ck/ckpt-0000000000$AT-*/MANIFEST" >/dev/null && break
        sleep 0.05
      done
      kill -KILL "$(cat "run$i/pids/ps$PS.pid")" || fail "run $i: no ps task to kill"
      wait $JOB
      rc=$?
      cat "run$i/log.txt" >>"$LOG"
      [ $rc = 0 ] || fail "run $i: the job exited with $rc"
      grep -Eq "restarting the job \(restart [1-4] of 4\) after rank ps:$PS" "run$i/log.txt" ||
        fail "run $i: hbrun did not restart the job after ps task $PS died"
      grep -Eq "rank 0 starts at step [1-3][0-9] \(restart [1-4]\)" "run$i/log.txt" ||
        fail "run $i: the restarted job did not resume from a checkpoint"
      grep -q " 0 not applied exactly once" "run$i/log.txt" || fail "run $i: counts"
      [ -f "run$i/count_ok" ] || fail "run $i: no exactly-once verdict"
      # 3 workers x 60 steps x 25 samples (a split of 100 is 4 batches)
      # outrun the 4000 samples: the queue runs dry inside the checkpointed
      # steps, and hb_ps_split_try answers HB_PS_SPLIT_LATER to whoever the
      # last splits are not for.
      if [ "$W" -ge 3 ]; then
        grep -Eq "\([1-9][0-9]* tries answered later\)" "run$i/log.txt" ||
          fail "run $i: hb_ps_split_try never answered HB_PS_SPLIT_LATER"
      fi
      # The evaluator sees each kept checkpoint's queue, as its tables.
      (cd "run$i" && "$PS_TRAIN" evalsplits ck 2000 >>"$LOG" 2>&1) ||
        fail "run $i: the evaluator's view of the split queue"
      # Batches of 30 in splits of 100: some checkpoints hold open splits.
      grep -Eq "^evaluator: step .* [1-9][0-9]* open" "$LOG" ||
        fail "run $i: no checkpoint with an open split evaluated"
    done
    ;;
  join)
    W=$1 P=$2 K=$3
    mkdir pids
    HOSTS=
    for p in $(seq 0 $((P - 1))); do
      HOSTS=$HOSTS${HOSTS:+,}127.0.0.1:$(free_port)
    done
    export HB_PS_HOSTS=$HOSTS HB_HEARTBEAT_INTERVAL_MS=100 HB_STALENESS=$K \
      HB_TIMEOUT_MS=20000 HB_PS_SPLIT_SAMPLES=2000 HB_PS_SPLIT_SIZE=100 \
      HB_PS_SPLIT_EPOCHS=2 HB_PS_SPLIT_SEED=$RANDOM
    PSS=()
    for p in $(seq 0 $((P - 1))); do
      HB_TASK_TYPE=ps HB_TASK_ID=$p "$PS_TRAIN" splits out >"ps$p.log" 2>&1 &
      PSS+=($!)
    done
    PIDS=()
    for r in $(seq 0 $((W - 1))); do
      HB_RANK=$r HB_WORLD_SIZE=$W "$PS_TRAIN" splits count_ok --batch 20 \
        --step-ms 15 --pid-dir pids --workers $((W + 1)) >"worker$r.log" 2>&1 &
      PIDS+=($!)
    done
    # Under way: worker 0 is up and took a split or two.
    [ -n "$(worker_pid 0)" ] || fail "worker 0 never started"
    sleep 0.4
    echo "test: worker $W joins" >>"$LOG"
    HB_RANK=$W HB_WORLD_SIZE=$((W + 1)) "$PS_TRAIN" splits joined --batch 20 \
      --step-ms 15 >"worker$W.log" 2>&1 &
    PIDS+=($!)
    bad=
    for r in $(seq 0 $W); do
      wait "${PIDS[$r]}" || bad="$bad worker $r exited with $?;"
      cat "worker$r.log" >>"$LOG"
    done
    for p in $(seq 0 $((P - 1))); do
      wait "${PSS[$p]}" || bad="$bad ps task $p exited with $?;"
      cat "ps$p.log" >>"$LOG"
    done
    [ -z "$bad" ] || fail "$bad"
    grep -q "worker rank $W joins" "$LOG" || fail "the ps tasks did not admit worker $W"
    n=$(sed -n "s/.*rank $W: took \([0-9]*\) splits.*/\1/p" "worker$W.log")
    [ "${n:-0}" -ge 1 ] || fail "the joined worker took no split"
    grep -q " 0 not applied exactly once" "$LOG" || fail "counts"
    [ -f count_ok ] || fail "no exactly-once verdict"
    ;;
  hbrunjoin)
    W=$1 P=$2 K=$3 LINGER=${4:-}
    WAIT=(--workers $((W + 1))) STAY=()
    [ -n "$LINGER" ] && WAIT=() STAY=(--linger-ms 3000)
    mkdir pids
    export HB_JOB_DIR=$WORK HB_HEARTBEAT_INTERVAL_MS=100 HB_STALENESS=$K \
      HB_TIMEOUT_MS=20000 HB_PS_SPLIT_SAMPLES=2000 HB_PS_SPLIT_SIZE=100 \
      HB_PS_SPLIT_EPOCHS=2 HB_PS_SPLIT_SEED=$RANDOM
    join_fails() {  # join_fails JOB WHAT: --join JOB exits 2 saying WHAT
      "$HBRUN" --join "$1" -- "$PS_TRAIN" splits joined >join_err.log 2>&1
      local rc=$?
      cat join_err.log >>"$LOG"
      [ $rc = 2 ] || fail "--join $1 exited with $rc, expected 2"
      grep -q "$2" join_err.log || fail "--join $1 did not say '$2'"
    }
    join_fails 1 "no running hbrun --ps job '1'"
    printf 'pid=999999999\nps_hosts=127.0.0.1:1\nworld=1\nnext_rank=1\n' >stale.job
    join_fails stale.job "its hbrun (pid 999999999) is gone"
    "$HBRUN" -n "$W" --ps "$P" --timeout 60 -v -- "$PS_TRAIN" splits count_ok \
      --batch 20 --step-ms 15 --pid-dir pids "${WAIT[@]}" >>"$LOG" 2>&1 &
    JOB=$!
    # Under way: worker 0 is up and took a split or two.
    [ -n "$(worker_pid 0)" ] || fail "worker 0 never started"
    [ -s "hbrun-$JOB.job" ] || fail "no job file hbrun-$JOB.job"
    sleep 0.4
    echo "test: hbrun --join $JOB" >>"$LOG"
    "$HBRUN" --join "$JOB" -v --timeout 60 -- "$PS_TRAIN" splits joined \
      --batch 20 --step-ms 15 "${STAY[@]}" >join.log 2>&1
    rc=$?
    echo "test: the joining hbrun exited" >>"$LOG"
    wait $JOB
    rc_job=$?
    cat join.log >>"$LOG"
    [ $rc = 0 ] || fail "the joining hbrun exited with $rc"
    [ $rc_job = 0 ] || fail "the job exited with $rc_job"
    grep -q "joining job $JOB .*ranks $W..$W of $((W + 1))" join.log ||
      fail "the joiner did not take rank $W"
    grep -q "worker rank $W joins" "$LOG" || fail "the ps tasks did not admit worker $W"
    n=$(sed -n "s/.*rank $W: took \([0-9]*\) splits.*/\1/p" join.log)
    [ "${n:-0}" -ge 1 ] || fail "the joined worker took no split"
    grep -q " 0 not applied exactly once" "$LOG" || fail "counts"
    [ -f count_ok ] || fail "no exactly-once verdict"
    [ ! -e "hbrun-$JOB.job" ] || fail "the job file outlived the job"
    # The ps tasks outlived the joiner: nobody stopped them under it.
    sed '/test: the joining hbrun exited/q' "$LOG" | grep -q "no worker left: stopping" &&
      fail "hbrun stopped the ps tasks while the joined worker still ran"
    join_fails "$JOB" "no running hbrun --ps job '$JOB'"
    ;;
  pskill)
    # A ps task that dies stops the job: every worker fails with
    # HB_ERR_PEER_FAILED naming it, within two heartbeats or so. The tasks
    # are started by hand (the HB_* variables hbrun would set), so nothing
    # but hb stops the workers.
    W=$1
    PORT=$(free_port)
    export HB_PS_HOSTS=127.0.0.1:$PORT HB_HEARTBEAT_INTERVAL_MS=100
    HB_TASK_TYPE=ps HB_TASK_ID=0 "$PS_TRAIN" train ps >ps.log 2>&1 &
    PS=$!
    PIDS=()
    for r in $(seq 0 $((W - 1))); do
      HB_RANK=$r HB_WORLD_SIZE=$W HB_STALENESS=1 "$PS_TRAIN" train out \
        --steps 100000 >"worker$r.log" 2>&1 &
      PIDS+=($!)
    done
    sleep 1
    kill -KILL $PS
    echo "test: SIGKILL ps task 0" >>"$LOG"
    t0=$SECONDS
    for r in $(seq 0 $((W - 1))); do
      wait "${PIDS[$r]}"
      rc=$?
      cat "worker$r.log" >>"$LOG"
      [ $rc = 1 ] || fail "worker $r exited with $rc, expected 1"
      grep -q "HB_ERR_PEER_FAILED.*ps task 0" "worker$r.log" ||
        fail "worker $r did not report HB_ERR_PEER_FAILED naming ps task 0"
    done
    [ $((SECONDS - t0)) -le 10 ] || fail "workers took $((SECONDS - t0)) s to fail"
    ;;
  *)
    echo "unknown mode $MODE"
    exit 2
    ;;
esac
echo "---- log"
cat "$LOG"
echo "PASSED: $MODE $*"
