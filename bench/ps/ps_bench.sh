#!/usr/bin/env bash
# The CTR demo (examples/ctr_train) in parameter-server mode against
# collective mode, with and without a straggler, interleaved in one run
# (this machine's speed drifts: compare only within a run), median of REPS.
#
#   bench/ps/ps_bench.sh BUILD_DIR [REPS] [TRAIN_SAMPLES]
#   BENCH=age bench/ps/ps_bench.sh BUILD_DIR [REPS] [TRAIN_SAMPLES]
#
# BENCH=age: the modes (collective; ps with the step bound k=4; ps with the
# age bound k=4, staleness_bound=age, where nobody waits and the demo's
# workers take batches on demand from a job-wide sample counter; the same
# with dynamic splits, ctr_train --splits: the batches from ps task 0's
# split queue, every sample exactly once; AGE_MODES="collective steps_k4
# splits_k4" picks some), without and with the straggler at
# half speed, then the job's samples/s with the straggler at 0.75x and 0.25x
# against the sum of the workers' rates ((1 + speed) / 2 of the job's rate
# without a straggler). The straggler here runs RUN_MS (default 20) and is
# stopped RUN_MS * (1 - speed) / speed: its CPU is free meanwhile, as a
# sleep would leave it. 1 ps task.
#
# Configurations: collective (2 workers); ps with 1 ps task + 2 workers and
# 2 + 2, at staleness 0 (synchronous) and 4. The straggler is worker rank 1
# slowed to half speed by a duty cycle of SIGSTOP / SIGCONT (STOP_MS
# stopped, then as long running). ps mode runs with a peer timeout of
# PS_PEER_TIMEOUT_MS (a worker stopped longer is lost until it speaks
# again; collective mode keeps its default, as it cannot lose a rank).
# Throughput: the job's samples over the training time (until the job has
# seen TRAIN_SAMPLES, all workers together); AUC: held-out exact AUC of the
# final model. "ps ids/s per core": rows the ps tasks pulled and pushed per
# second of their CPU time (a ps task is one thread).
set -u
BUILD=$(realpath "$1")
REPS=${2:-3}
SAMPLES=${3:-240000}
STOP_MS=${STOP_MS:-2000}
PS_PEER_TIMEOUT_MS=${PS_PEER_TIMEOUT_MS:-1000}
HBRUN=$BUILD/src/launcher/hbrun
CTR=$BUILD/examples/ctr_train/ctr_train
WORK=$(mktemp -d /tmp/hb_ps_bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# The worker with HB_RANK=$2 among the children of hbrun $1 (0 if none yet).
worker_pid() {
  local c
  for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
    if tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx "HB_RANK=$2"; then
      echo "$c"
      return
    fi
  done
  echo 0
}

# Duty cycle on rank 1 of hbrun $1 until it exits: stopped $2 ms (default
# STOP_MS), then running $3 ms (default the same: half speed).
straggle() {
  local pid=0 stop=${2:-$STOP_MS} go=${3:-$STOP_MS}
  local stop_s go_s
  stop_s=$(awk -v m="$stop" 'BEGIN { printf "%.3f", m / 1000 }')
  go_s=$(awk -v m="$go" 'BEGIN { printf "%.3f", m / 1000 }')
  while kill -0 "$1" 2>/dev/null; do
    [ "$pid" != 0 ] || pid=$(worker_pid "$1" 1)
    if [ "$pid" != 0 ]; then
      kill -STOP "$pid" 2>/dev/null
      sleep "$stop_s"
      kill -CONT "$pid" 2>/dev/null
    fi
    sleep "$go_s"
  done
}

# run NAME PS STALENESS STRAGGLER [BOUND [SPEED]]: one job; appends "NAME
# samples/s auc ids_per_core" to $WORK/results. BOUND: steps or age; SPEED:
# the straggler's (RUN_MS duty cycle) instead of STOP_MS on, STOP_MS off.
run() {
  local name=$1 ps=$2 k=$3 straggler=$4 bound=${5:-steps} speed=${6:-}
  local log=$WORK/$1.$RANDOM.log
  local args=(--train-samples "$SAMPLES" --eval-every 1000000000 --log-every 1000000
              --max-gap 1 --out "$WORK/out" ${CTR_EXTRA:-})
  if [ "$ps" = 0 ]; then
    "$HBRUN" -n 2 --timeout 600 -- "$CTR" "${args[@]}" >"$log" 2>&1 &
  else
    HB_STALENESS=$k HB_STALENESS_BOUND=$bound HB_PEER_TIMEOUT_MS=$PS_PEER_TIMEOUT_MS HB_HEARTBEAT_INTERVAL_MS=100 \
      "$HBRUN" -n 2 --ps "$ps" --timeout 600 -- "$CTR" "${args[@]}" >"$log" 2>&1 &
  fi
  local job=$!
  local st=
  if [ "$straggler" = 1 ] && [ -n "$speed" ]; then
    straggle "$job" "$(awk -v r="$RUN_MS" -v s="$speed" 'BEGIN { print r * (1 - s) / s }')" "$RUN_MS" &
    st=$!
  elif [ "$straggler" = 1 ]; then
    straggle "$job" &
    st=$!
  fi
  wait "$job"
  local rc=$?
  [ -n "$st" ] && wait "$st"
  if [ "$rc" != 0 ]; then
    echo "$name: exit $rc" >&2
    tail -5 "$log" >&2
    return
  fi
  local sps auc ipc
  if [ "$ps" = 0 ]; then
    # "final: N steps in T s; held-out exact AUC A ..."
    sps=$(awk -v n="$SAMPLES" '/final: .* steps in/ { for (i = 1; i <= NF; ++i) if ($i == "in") t = $(i + 1); print n / t }' "$log")
    ipc=-
  else
    sps=$(awk '/final: .* samples in/ { for (i = 1; i <= NF; ++i) if ($i == "(") ; } /final: .* samples in/ { split($0, a, "[(]"); split(a[2], b, " "); print b[1] }' "$log")
    # Rows pulled and pushed (the chief's stats line) over the ps tasks'
    # CPU seconds (each prints its own at the end).
    ipc=$(awk '/ps: .* pulls/ { for (i = 1; i <= NF; ++i) { if ($(i + 1) == "rows" && $(i + 2) == "pulled,") p = $i; if ($(i + 1) == "rows" && $(i + 2) == "pushed,") q = $i } }
               /ps task [0-9]+: cpu/ { for (i = 1; i <= NF; ++i) if ($i == "cpu") c += $(i + 1) }
               END { if (c > 0) print (p + q) / c; else print "-" }' "$log")
  fi
  auc=$(awk '/held-out exact AUC/ { for (i = 1; i <= NF; ++i) if ($i == "AUC") { print $(i + 1); exit } }' "$log")
  echo "$name $sps $auc $ipc" >>"$WORK/results"
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
col() { awk -v n="$1" -v c="$2" '$1 == n { print $c }' "$WORK/results" | median; }

if [ "${BENCH:-}" = age ]; then
  RUN_MS=${RUN_MS:-20}
  # A mode: name, ps tasks, staleness, bound[, ctr_train flag]. splits_k4:
  # the age bound with the train samples taken from the split queue
  # (--splits: every sample exactly once).
  MODES=("collective 0 0 steps" "steps_k4 1 4 steps" "age_k4 1 4 age" "splits_k4 1 4 age --splits")
  [ -n "${AGE_MODES:-}" ] && read -r -a pick <<<"$AGE_MODES" && {
    keep=()
    for m in "${MODES[@]}"; do
      for p in "${pick[@]}"; do [ "${m%% *}" = "$p" ] && keep+=("$m"); done
    done
    MODES=("${keep[@]}")
  }
  echo "ctr_train, 2 workers, 1 ps task, $SAMPLES train samples, $REPS reps interleaved; straggler: rank 1 runs ${RUN_MS} ms, stopped ${RUN_MS} * (1 - speed) / speed ms"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  for rep in $(seq "$REPS"); do
    for m in "${MODES[@]}"; do
      set -- $m
      export CTR_EXTRA=${5:-}
      run "$1.1" "$2" "$3" 0 "$4"
      for sp in 0.75 0.5 0.25; do
        [ "$1" = collective ] && [ "$sp" != 0.5 ] && continue
        run "$1.$sp" "$2" "$3" 1 "$4" "$sp"
      done
    done
    unset CTR_EXTRA
    echo "rep $rep done, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  done
  echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
  printf "\n| mode | straggler speed | samples/s (median) | vs collective | vs step bound | held-out AUC (median) | AUC - collective's |\n"
  printf "| --- | --- | --- | --- | --- | --- | --- |\n"
  for sp in 1 0.5; do
    base=$(col "collective.$sp" 2) sb=$(col "steps_k4.$sp" 2) bauc=$(col "collective.$sp" 3)
    for m in "${MODES[@]}"; do
      set -- $m
      sps=$(col "$1.$sp" 2) auc=$(col "$1.$sp" 3)
      awk -v m="$1" -v sp="$sp" -v a="$sps" -v b="$base" -v s="$sb" -v u="$auc" -v bu="$bauc" \
        'BEGIN { printf "| %s | %sx | %.0f | %.2fx | %.2fx | %s | %+.4f |\n", m, sp, a, a / b, a / s, u, u - bu }'
    done
  done
  printf "\n| mode | straggler speed | job samples/s (median) | sum of the workers' rates | job / sum |\n"
  printf "| --- | --- | --- | --- | --- |\n"
  for m in "${MODES[@]}"; do
    m=${m%% *}
    [ "$m" = collective ] && continue
    full=$(col "$m.1" 2)
    for sp in 1 0.75 0.5 0.25; do
      sps=$(col "$m.$sp" 2)
      awk -v m="$m" -v sp="$sp" -v a="$sps" -v f="$full" \
        'BEGIN { sum = f * (1 + sp) / 2; printf "| %s | %sx | %.0f | %.0f | %.2f |\n", m, sp, a, sum, a / sum }'
    done
  done
  exit 0
fi

CONFIGS=(
  "collective 0 0"
  "ps1_k0 1 0"
  "ps1_k4 1 4"
  "ps2_k0 2 0"
  "ps2_k4 2 4"
)
echo "ctr_train, 2 workers, $SAMPLES train samples, $REPS reps, straggler: rank 1 stopped ${STOP_MS} ms of every $((2 * STOP_MS)) ms; ps peer timeout ${PS_PEER_TIMEOUT_MS} ms"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for rep in $(seq "$REPS"); do
  for straggler in 0 1; do
    for c in "${CONFIGS[@]}"; do
      set -- $c
      run "$1.s$straggler" "$2" "$3" "$straggler"
    done
  done
  echo "rep $rep done, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

printf "\n| mode | ps tasks | staleness | straggler | samples/s (median) | vs collective | held-out AUC (median) | ps ids/s per core |\n"
printf "| --- | --- | --- | --- | --- | --- | --- | --- |\n"
for straggler in 0 1; do
  base=$(awk -v n="collective.s$straggler" '$1 == n { print $2 }' "$WORK/results" | median)
  for c in "${CONFIGS[@]}"; do
    set -- $c
    n="$1.s$straggler"
    sps=$(awk -v n="$n" '$1 == n { print $2 }' "$WORK/results" | median)
    auc=$(awk -v n="$n" '$1 == n { print $3 }' "$WORK/results" | median)
    ipc=$(awk -v n="$n" '$1 == n && $4 != "-" { print $4 }' "$WORK/results" | median)
    ratio=$(awk -v a="$sps" -v b="$base" 'BEGIN { if (b > 0 && a != "-") printf "%.2fx", a / b; else print "-" }')
    mode=collective
    [ "$2" = 0 ] || mode=ps
    printf "| %s | %s | %s | %s | %.0f | %s | %s | %s |\n" "$mode" "$2" \
      "$([ "$2" = 0 ] && echo - || echo "$3")" "$([ "$straggler" = 1 ] && echo yes || echo no)" \
      "$sps" "$ratio" "$auc" "$([ "$ipc" = - ] && echo - || printf '%.0f' "$ipc")"
  done
done
