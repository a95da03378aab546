#!/usr/bin/env bash
# What the lock step costs the C++ CTR demo per step (docs/performance.md,
# "The lock step, measured"): each world size runs once with HB_TIMELINE,
# and lock_step.py splits every rank's time in each collective into the
# wait for the last rank to arrive and the rest after all had (transfer,
# the owners' work in the round, a sleeper's wake-up), in ms per step per
# rank, with the main thread's total wait beside the step time. The waits
# on helper threads (the progress thread's rounds, posted by
# hb_collection_lookup_start) overlap the main thread's compute; the main
# thread's are the step's. Run from the repository root:
#   NPS="2 4" bench/ctr_cpu/lock_step.sh BUILD_DIR
# Environment: NPS="2 4", SAMPLES=240000, VOCAB=2048, REPEATS=1, LOAD=0
# (1: a nice-19 busy loop beside each run, as ctr_compare.sh's LOAD=1);
# HB_* options pass through to the ranks.
set -u
B=$(cd "$1" && pwd); here=$(cd "$(dirname "$0")" && pwd)
S=${SAMPLES:-240000}; V=${VOCAB:-2048}; NPS=${NPS:-"2 4"}; R=${REPEATS:-1}
W=$(mktemp -d); BG=""
trap '[ -n "$BG" ] && kill $BG 2>/dev/null; rm -rf "$W"' EXIT
label=quiet; [ "${LOAD:-0}" = 1 ] && label="LOAD=1"
echo "# $(date -u +%H:%M) load average $(cut -d' ' -f1-3 /proc/loadavg); vocab $V, $S samples"
echo "| run | ranks | collective | thread | calls/step | ms/step in it | waiting for the last rank | after all arrived |"
echo "|---|---|---|---|---|---|---|---|"
for rep in $(seq 1 "$R"); do for np in $NPS; do
  rm -f "$W"/trace.*
  [ "${LOAD:-0}" = 1 ] && { nice -n 19 sh -c 'while :; do :; done' & BG=$!; sleep 0.2; }
  HB_TIMELINE="$W/trace.json" "$B/src/launcher/hbrun" -n "$np" -- \
    "$B/examples/ctr_train/ctr_train" --train-samples "$S" --vocab "$V" \
    --eval-samples 8000 --eval-every 1000000 --max-gap 1 --out "$W/out" > "$W/log" 2>&1
  rc=$?
  if [ -n "$BG" ]; then kill $BG; wait $BG 2>/dev/null; BG=""; fi
  [ $rc = 0 ] || { echo "np $np failed:" >&2; tail -5 "$W/log" >&2; exit 1; }
  steps=$(sed -n 's/.*\[0\] final: \([0-9]*\) steps.*/\1/p' "$W/log" | head -1)
  python3 "$here/lock_step.py" "$W" "$np" "$steps" "$label $rep" || exit 1
done; done
