#!/usr/bin/env bash
# A/B of cpu_async_exchange's modes on the C++ CTR demo (docs/performance.md,
# "Progress threads only where a CPU is free"): per repeat, back to back,
# one 1-rank job, then one NP-rank job per mode in MODES (HB_CPU_ASYNC_EXCHANGE
# = 1 threads, 0 inline, -1 auto), ctr_compare.sh's flags. Beside samples/s
# it gives what the job's processes cost per training step, from GNU time
# over hbrun (which waits for its workers, so their rusage is included):
# CPU ms (user + sys), voluntary context switches (a wait that slept) and
# involuntary ones (preempted), less sensitive to other tenants than the
# wall clock. Run from the repository root:
#   REPEATS=3 bench/ctr_cpu/progress_mode_ab.sh _build
# Environment: SAMPLES=240000, VOCAB=2048, NP=2, MODES="1 -1", LOAD=0 (1: a
# nice-19 busy loop beside every job, as ctr_compare.sh's LOAD=1).
set -u
B=$(cd "$1" && pwd)
S=${SAMPLES:-240000}; V=${VOCAB:-2048}; R=${REPEATS:-3}; NP=${NP:-2}
MODES=${MODES:-"1 -1"}; LOAD=${LOAD:-0}
W=$(mktemp -d); BG=""
trap '[ -n "$BG" ] && kill $BG 2>/dev/null; rm -rf "$W"' EXIT
job() {  # mode np -> "samples/s cpu_ms/step vcs/step ivcs/step"
  [ "$LOAD" = 1 ] && { nice -n 19 sh -c 'while :; do :; done' & BG=$!; sleep 0.2; }
  HB_CPU_ASYNC_EXCHANGE=$1 /usr/bin/time -f '%U %S %w %c' -o "$W/time" \
    "$B/src/launcher/hbrun" -n "$2" -- "$B/examples/ctr_train/ctr_train" \
    --train-samples "$S" --vocab "$V" --eval-samples 8000 \
    --eval-every 1000000 --max-gap 1 --out "$W/out" > "$W/log" 2>&1
  [ -n "$BG" ] && { kill $BG; wait $BG 2>/dev/null; BG=""; }
  read -r steps secs < <(sed -n 's/.*final: \([0-9]*\) steps in \([0-9.]*\) s.*/\1 \2/p' "$W/log")
  [ -n "${secs:-}" ] || { echo "a job failed:" >&2; tail -5 "$W/log" >&2; exit 1; }
  read -r u s w c < "$W/time"
  # Per step of every rank (the job's steps are per rank).
  awk -v S="$S" -v t="$secs" -v n="$steps" -v np="$2" -v u="$u" -v s="$s" -v w="$w" -v c="$c" \
    'BEGIN { printf "%.0f %.3f %.1f %.1f\n", S / t, (u + s) * 1000 / (n * np), w / (n * np), c / (n * np) }'
}
echo "# load=$LOAD $(cut -d' ' -f1-3 /proc/loadavg) (load average before)"
echo "| repeat | mode | ranks | samples/s | / 1 rank | CPU ms per rank-step | sleeps per rank-step | preemptions per rank-step |"
echo "|---|---|---|---|---|---|---|---|"
for r in $(seq 1 "$R"); do
  read -r one c1 w1 i1 < <(job 1 1) || exit 1
  echo "| $r | - | 1 | $one | 1.00 | $c1 | $w1 | $i1 |"
  for m in $MODES; do
    read -r x c w i < <(job "$m" "$NP") || exit 1
    echo "| $r | $m | $NP | $x | $(awk -v a="$x" -v b="$one" 'BEGIN { printf "%.2f", a / b }') | $c | $w | $i |"
  done
done | tee "$W/rows"
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
# Medians per mode (- = the 1-rank jobs) of samples/s, the ratio and the costs.
awk -F'|' '{ gsub(/ /, "", $3); k = $3; n[k]++; for (i = 5; i <= 9; ++i) v[k, i, n[k]] = $i + 0 }
  END { for (k in n) { printf "| median | %s | |", k
    for (i = 5; i <= 9; ++i) { m = n[k]; for (p = 1; p <= m; ++p) x[p] = v[k, i, p]
      for (p = 1; p <= m; ++p) for (q = p + 1; q <= m; ++q) if (x[q] < x[p]) { t = x[p]; x[p] = x[q]; x[q] = t }
      printf " %s |", (m % 2 ? x[(m + 1) / 2] : (x[m / 2] + x[m / 2 + 1]) / 2) }
    printf "\n" } }' "$W/rows"
