#!/usr/bin/env bash
# The C++ CTR demo with its train batches generated on the prefetch thread
# (the default) against in the step (--no-prefetch), interleaved per repeat
# and world size. Per launch a RESULT line: train samples/s (global; eval
# excluded) and the CPU of every rank's process over the training steps
# (--profile's "profile cpu" line: every thread, the prefetch included) per
# sample, and the prefetch thread's share of it. Then the medians per mode
# and world size, and prefetch / no-prefetch.
#   bench/ctr_cpu/prefetch_ab.sh BUILD_DIR
# Environment: NPS="1 2 4", SAMPLES=240000, VOCAB=2048, REPEATS=3, LOAD=0
# (1: one busy loop at nice 19 beside every launch, as ctr_compare.sh's).
set -u
B=$(cd "$1" && pwd)
NPS=${NPS:-"1 2 4"}; S=${SAMPLES:-240000}; V=${VOCAB:-2048}; R=${REPEATS:-3}
LOAD=${LOAD:-0}
W=$(mktemp -d); BG=""
trap '[ -n "$BG" ] && kill $BG 2>/dev/null; rm -rf "$W"' EXIT
for rep in $(seq 1 "$R"); do for np in $NPS; do for mode in prefetch no-prefetch; do
  if [ "$LOAD" = 1 ]; then nice -n 19 sh -c 'while :; do :; done' & BG=$!; fi
  flag=""; [ $mode = no-prefetch ] && flag=--no-prefetch
  "$B/src/launcher/hbrun" -n "$np" -- "$B/examples/ctr_train/ctr_train" $flag --profile \
    --train-samples "$S" --vocab "$V" --eval-samples 8000 --eval-every 1000000 \
    --max-gap 1 --out "$W/o" > "$W/log" 2>&1
  if [ -n "$BG" ]; then kill $BG; wait $BG 2>/dev/null; BG=""; fi
  awk -v mode=$mode -v np=$np -v S="$S" -v load="$LOAD" '
    /final: [0-9]+ steps in/ { for (i = 1; i <= NF; ++i) { if ($i == "in") sec = $(i + 1); if ($i == "steps") steps = $(i - 1) } }
    /profile cpu rank/ { for (i = 1; i <= NF; ++i) { if ($i == "thread") pf += $(i + 1); if ($i == "process") pr += $(i + 1) } }
    END { if (!sec) { print "launch failed: " mode " np " np > "/dev/stderr"; exit 1 }
          # ms per step per rank, summed over the ranks -> us per global sample
          printf "RESULT mode=%s np=%d load=%s samples_per_s=%.0f cpu_us_per_sample=%.3f prefetch_us_per_sample=%.3f\n",
                 mode, np, load, S / sec, 1e3 * pr * steps / S, 1e3 * pf * steps / S }' "$W/log" ||
    { cat "$W/log" >&2; exit 1; }
done; done; done | tee "$W/rows"
# Per world size: the medians of each mode and of the per-repeat ratios
# prefetch / no-prefetch (each pair ran back to back).
awk '{ for (i = 2; i <= NF; ++i) { split($i, kv, "="); f[kv[1]] = kv[2] }
       k = f["mode"] " " f["np"]; c = ++cnt[k]; sp[k, c] = f["samples_per_s"]
       cp[k, c] = f["cpu_us_per_sample"]; nps[f["np"]] = 1
       if (f["mode"] == "no-prefetch") {
         o = "prefetch " f["np"]; rs[f["np"], c] = sp[o, c] / sp[k, c]; rc[f["np"], c] = cp[o, c] / cp[k, c] } }
  function med(a, k, n,   x, i, j, t) {
    for (i = 1; i <= n; ++i) x[i] = a[k, i] + 0
    for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
    return n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2 }
  END { for (np in nps) { a = "prefetch " np; b = "no-prefetch " np; n = cnt[b]
          printf "median np=%s: samples/s prefetch %.0f no-prefetch %.0f (pair ratio %.2fx); " \
                 "cpu us/sample %.2f vs %.2f (pair ratio %.2fx)\n", np, med(sp, a, n), med(sp, b, n),
                 med(rs, np, n), med(cp, a, n), med(cp, b, n), med(rc, np, n) } }' "$W/rows"
