#!/usr/bin/env bash
# Two ways of running the C++ CTR demo, A and B, interleaved per repeat and
# world size: by default the build's ctr_train with its train batches
# generated on the prefetch thread (A) against in the step (B,
# --no-prefetch); with B_BIN, two builds (e.g. main's and this one's) with
# the same flags. Per launch a RESULT line: train samples/s (global; eval
# excluded), the CPU of every rank's process over the training steps
# (--profile's "profile cpu" line: every thread, the prefetch included) per
# sample, the prefetch thread's share of it (the data generation), and
# the host's steal time over the launch (the share of all CPU time the
# hypervisor ran something else while this VM wanted to run, from
# /proc/stat: slow launches on this VM come with it).
# CPU per sample holds on a shared machine where wall time mostly measures
# the other tasks. Then the medians per way and world size, and A / B.
#   bench/ctr_cpu/demo_ab.sh BUILD_DIR
# Environment: NPS="1 2 4", SAMPLES=240000, VOCAB=2048, REPEATS=3, LOAD=0
# (1: one busy loop at nice 19 beside every launch, as ctr_compare.sh's);
# A_BIN, B_BIN (ctr_train binaries; default BUILD_DIR's), A_FLAGS (default
# none), B_FLAGS (default --no-prefetch with one binary, none with B_BIN),
# A_NAME, B_NAME (the labels; default prefetch / no-prefetch, or a / b),
# A_ENV, B_ENV (variable assignments for each way's launch, e.g.
# B_ENV="HB_CPU_WAIT_SPIN_US=2000" B_FLAGS= B_NAME=spin2000).
set -u
B=$(cd "$1" && pwd)
NPS=${NPS:-"1 2 4"}; S=${SAMPLES:-240000}; V=${VOCAB:-2048}; R=${REPEATS:-3}
LOAD=${LOAD:-0}
A_BIN=${A_BIN:-$B/examples/ctr_train/ctr_train}
if [ -n "${B_BIN:-}" ]; then
  B_FLAGS=${B_FLAGS-}; A_NAME=${A_NAME:-a}; B_NAME=${B_NAME:-b}
else
  B_BIN=$A_BIN; B_FLAGS=${B_FLAGS---no-prefetch}; A_NAME=${A_NAME:-prefetch}; B_NAME=${B_NAME:-no-prefetch}
fi
A_FLAGS=${A_FLAGS-}; A_ENV=${A_ENV-}; B_ENV=${B_ENV-}
# steal jiffies and all jiffies of the host so far
steal() { awk '/^cpu / { t = 0; for (i = 2; i <= 9; ++i) t += $i; print $9, t }' /proc/stat; }
W=$(mktemp -d); BG=""
trap '[ -n "$BG" ] && kill $BG 2>/dev/null; rm -rf "$W"' EXIT
for rep in $(seq 1 "$R"); do for np in $NPS; do for mode in "$A_NAME" "$B_NAME"; do
  if [ "$LOAD" = 1 ]; then nice -n 19 sh -c 'while :; do :; done' & BG=$!; fi
  bin=$A_BIN flags=$A_FLAGS envs=$A_ENV
  [ "$mode" = "$B_NAME" ] && bin=$B_BIN flags=$B_FLAGS envs=$B_ENV
  read -r s0 t0 < <(steal)
  env $envs "$B/src/launcher/hbrun" -n "$np" -- "$bin" $flags --profile \
    --train-samples "$S" --vocab "$V" --eval-samples 8000 --eval-every 1000000 \
    --max-gap 1 --out "$W/o" > "$W/log" 2>&1
  read -r s1 t1 < <(steal)
  if [ -n "$BG" ]; then kill $BG; wait $BG 2>/dev/null; BG=""; fi
  awk -v mode=$mode -v np=$np -v S="$S" -v load="$LOAD" \
      -v steal="$(( 100 * (s1 - s0) / (t1 - t0 + 1) ))" '
    /final: [0-9]+ steps in/ { for (i = 1; i <= NF; ++i) { if ($i == "in") sec = $(i + 1); if ($i == "steps") steps = $(i - 1) } }
    /profile cpu rank/ { for (i = 1; i <= NF; ++i) { if ($i == "thread") pf += $(i + 1); if ($i == "process") pr += $(i + 1) } }
    END { if (!sec) { print "launch failed: " mode " np " np > "/dev/stderr"; exit 1 }
          # ms per step per rank, summed over the ranks -> us per global sample
          printf "RESULT mode=%s np=%d load=%s samples_per_s=%.0f cpu_us_per_sample=%.3f prefetch_us_per_sample=%.3f steal_pct=%d\n",
                 mode, np, load, S / sec, 1e3 * pr * steps / S, 1e3 * pf * steps / S, steal }' "$W/log" ||
    { cat "$W/log" >&2; exit 1; }
done; done; done | tee "$W/rows"
# Per world size: the medians of each way and of the per-repeat ratios
# A / B (each pair ran back to back).
awk -v A="$A_NAME" -v B="$B_NAME" '{ for (i = 2; i <= NF; ++i) { split($i, kv, "="); f[kv[1]] = kv[2] }
       k = f["mode"] " " f["np"]; c = ++cnt[k]; sp[k, c] = f["samples_per_s"]
       cp[k, c] = f["cpu_us_per_sample"]; gp[k, c] = f["prefetch_us_per_sample"]; nps[f["np"]] = 1
       st[k, c] = f["steal_pct"]
       if (f["mode"] == B) {
         o = A " " f["np"]; rs[f["np"], c] = sp[o, c] / sp[k, c]; rc[f["np"], c] = cp[o, c] / cp[k, c] } }
  function med(a, k, n,   x, i, j, t) {
    for (i = 1; i <= n; ++i) x[i] = a[k, i] + 0
    for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
    return n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2 }
  END { for (np in nps) { a = A " " np; b = B " " np; n = cnt[b]
          printf "median np=%s: samples/s %s %.0f %s %.0f (pair ratio %.2fx); " \
                 "cpu us/sample %.2f vs %.2f (pair ratio %.2fx); prefetch thread us/sample %.2f vs %.2f; " \
                 "steal %% %d vs %d\n",
                 np, A, med(sp, a, n), B, med(sp, b, n), med(rs, np, n), med(cp, a, n), med(cp, b, n),
                 med(rc, np, n), med(gp, a, n), med(gp, b, n), med(st, a, n), med(st, b, n) } }' "$W/rows"
