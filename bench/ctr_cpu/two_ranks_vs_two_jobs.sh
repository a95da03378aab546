#!/usr/bin/env bash
# How close hb's C++ CTR demo at 2 ranks comes to what two cores can give:
# per repeat, back to back, (a) one 1-rank job, (b) two independent 1-rank
# jobs at once (no communication: the most two processes get from this
# machine) and (c) one 2-rank job, each training SAMPLES samples per job.
# b / a is the machine's own scaling (shared caches, memory, the
# hypervisor); c / b is what hb's exchange costs on top. The three run
# within seconds of each other, so the machine's slow drift affects them
# alike; the medians are over REPEATS.
# The bound that b / a sets on c / a (2 on two idle cores) assumes a 1-rank
# job runs on one core. The demo generates its next batch on a thread
# (its default; --no-prefetch: in the step), so one 1-rank job alone uses
# u > 1 cores (its process CPU over wall time: PROFILE=1 prints u per
# repeat) and two jobs at once cannot both get u: the bound on 2 ranks / 1
# rank becomes about (b / a) / u, e.g. 2 / 1.25 = 1.6 where u is 1.25.
# FLAGS="--no-prefetch" measures the one-core bound. N=4 asks the same of
# more ranks than cores: N independent 1-rank jobs at once against one
# N-rank job (2 per core here): whether an oversubscribed job loses to
# the oversubscription itself (caches, switches) or to its exchange.
#   bench/ctr_cpu/two_ranks_vs_two_jobs.sh BUILD_DIR
# LOAD=1 runs one busy loop at nice 19 beside each of (a), (b) and (c), as
# ctr_compare.sh's LOAD=1 does beside each run: b / a is then the bound
# under that load.
# Environment: N=2, SAMPLES=960000, VOCAB=2048, REPEATS=3, LOAD=0, PROFILE=0 (1: the
# jobs run with --profile and their per-rank phase times, ms per step,
# follow the table: where a 2-rank step's extra time goes, beside the same
# phases of the two independent jobs).
set -u
B=$(cd "$1" && pwd)
S=${SAMPLES:-960000}; V=${VOCAB:-2048}; R=${REPEATS:-3}; N=${N:-2}
W=$(mktemp -d)
P=""; [ "${PROFILE:-0}" = 1 ] && P=--profile
BG=""
load_on() { if [ "${LOAD:-0}" = 1 ]; then nice -n 19 sh -c 'while :; do :; done' & BG=$!; sleep 0.2; fi; }
load_off() { if [ -n "$BG" ]; then kill "$BG"; wait "$BG" 2>/dev/null; BG=""; fi; }
trap 'load_off; rm -rf "$W"' EXIT
job() {  # np out -> train seconds (the profile lines go to $W/prof_out)
  "$B/src/launcher/hbrun" -n "$1" -- "$B/examples/ctr_train/ctr_train" $P ${FLAGS:-} \
    --train-samples "$S" --vocab "$V" --eval-samples 8000 \
    --eval-every 1000000 --max-gap 1 --out "$W/$2" > "$W/log_$2" 2>&1
  grep 'profile rank' "$W/log_$2" | sed "s/^/# $2 (np $1): /" > "$W/prof_$2"
  sed -n 's/.*final: [0-9]* steps in \([0-9.]*\) s.*/\1/p' "$W/log_$2"
}
echo "| repeat | 1 rank | $N 1-rank jobs | $N ranks | jobs / 1 rank | $N ranks / 1 rank | $N ranks / jobs |"
echo "|---|---|---|---|---|---|---|"
for r in $(seq 1 "$R"); do
  load_on; a=$(job 1 a); load_off
  load_on
  pids=()
  for j in $(seq 1 "$N"); do job 1 "b$j" > "$W/t$j" & pids+=($!); done
  wait "${pids[@]}"
  load_off
  load_on; c=$(job "$N" d); load_off
  Bs=0
  for j in $(seq 1 "$N"); do
    [ -s "$W/t$j" ] || { echo "a job failed" >&2; exit 1; }
    Bs=$(awk -v x="$Bs" -v t="$(cat "$W/t$j")" -v S="$S" 'BEGIN { print x + S / t }')
  done
  [ -n "$a" ] && [ -n "$c" ] || { echo "a job failed" >&2; exit 1; }
  awk -v r="$r" -v S="$S" -v a="$a" -v Bs="$Bs" -v c="$c" \
    'BEGIN { A = S / a; C = S / c;
             printf "| %d | %.0f | %.0f | %.0f | %.2f | %.2f | %.2f |\n", r, A, Bs, C, Bs / A, C / A, C / Bs }'
  cat "$W"/prof_* >> "$W/profiles"
  # u: the 1-rank job's cores, its process CPU per step (training steps)
  # times its steps over its train seconds.
  awk -v a="$a" '/final: [0-9]+ steps in/ { for (i = 1; i <= NF; ++i) if ($i == "steps") n = $(i - 1) }
    /profile cpu rank 0/ { for (i = 1; i <= NF; ++i) if ($i == "process") ms = $(i + 1) }
    END { if (ms) printf "# repeat u = %.2f cores (1-rank job)\n", ms * n / 1e3 / a }' "$W/log_a" >> "$W/profiles"
done | tee "$W/rows"
[ -s "$W/profiles" ] && cat "$W/profiles"
# Medians of each column over the repeats.
awk -F'|' '{ for (i = 3; i <= 8; ++i) v[i, NR] = $i } END {
  printf "| median |"
  for (i = 3; i <= 8; ++i) {
    n = 0; for (k = 1; k <= NR; ++k) x[++n] = v[i, k] + 0
    for (p = 1; p <= n; ++p) for (q = p + 1; q <= n; ++q) if (x[q] < x[p]) { t = x[p]; x[p] = x[q]; x[q] = t }
    m = n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2
    printf (i <= 5 ? " %.0f |" : " %.2f |"), m
  }
  printf "\n" }' "$W/rows"
