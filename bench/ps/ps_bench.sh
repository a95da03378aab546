#!/usr/bin/env bash
# The CTR demo (examples/ctr_train) in parameter-server mode against
# collective mode, with and without a straggler, interleaved in one run
# (this machine's speed drifts: compare only within a run), median of REPS.
#
#   bench/ps/ps_bench.sh BUILD_DIR [REPS] [TRAIN_SAMPLES]
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

# Duty cycle on rank 1 of hbrun $1 until it exits: half speed.
straggle() {
  local pid=0
  while kill -0 "$1" 2>/dev/null; do
    [ "$pid" != 0 ] || pid=$(worker_pid "$1" 1)
    if [ "$pid" != 0 ]; then
      kill -STOP "$pid" 2>/dev/null
      sleep "$(awk -v m="$STOP_MS" 'BEGIN { printf "%.3f", m / 1000 }')"
      kill -CONT "$pid" 2>/dev/null
    fi
    sleep "$(awk -v m="$STOP_MS" 'BEGIN { printf "%.3f", m / 1000 }')"
  done
}

# run NAME PS STALENESS STRAGGLER: one job; appends "NAME samples/s auc
# ids_per_core" to $WORK/results.
run() {
  local name=$1 ps=$2 k=$3 straggler=$4 log=$WORK/$1.$RANDOM.log
  local args=(--train-samples "$SAMPLES" --eval-every 1000000000 --log-every 1000000
              --max-gap 1 --out "$WORK/out")
  if [ "$ps" = 0 ]; then
    "$HBRUN" -n 2 --timeout 600 -- "$CTR" "${args[@]}" >"$log" 2>&1 &
  else
    HB_STALENESS=$k HB_PEER_TIMEOUT_MS=$PS_PEER_TIMEOUT_MS HB_HEARTBEAT_INTERVAL_MS=100 \
      "$HBRUN" -n 2 --ps "$ps" --timeout 600 -- "$CTR" "${args[@]}" >"$log" 2>&1 &
  fi
  local job=$!
  local st=
  if [ "$straggler" = 1 ]; then
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

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
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
