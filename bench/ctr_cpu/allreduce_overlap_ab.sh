#!/usr/bin/env bash
# A/B of the overlapped dense allreduce (docs/performance.md, "The dense
# allreduce beside the sparse update"): the C++ CTR demo with its default
# step (hb_allreduce_start before the sparse update, the wait after it) and
# with --no-overlap (the blocking hb_allreduce_many first), interleaved per
# world size and repeat, with ctr_compare.sh's flags. One RESULT line per
# launch (overlap=1|0) with the global train samples/s (eval excluded) and
# the 1-minute load average before the launch. Run from the repository root:
#   REPEATS=3 NPS=2 bench/ctr_cpu/allreduce_overlap_ab.sh _build
# SAMPLES (240000), VOCAB (2048) as ctr_compare.sh.
set -u
B=$(cd "$1" && pwd)
R=${REPEATS:-3}; NPS=${NPS:-2}; S=${SAMPLES:-240000}; V=${VOCAB:-2048}
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
common="--train-samples $S --vocab $V --eval-samples 8000 --eval-every 1000000 --max-gap 1"
for rep in $(seq 1 "$R"); do for np in $NPS; do
  for o in 1 0; do
    flag=""; [ "$o" = 0 ] && flag=--no-overlap
    load=$(cut -d' ' -f1 /proc/loadavg)
    timeout 900 "$B/src/launcher/hbrun" -n "$np" -- "$B/examples/ctr_train/ctr_train" \
      $common $flag --out "$W/c" 2>&1 |
      sed -n 's/.*final: \([0-9]*\) steps in \([0-9.]*\) s;.*/\2/p' |
      awk -v S="$S" -v np="$np" -v o="$o" -v l="$load" -v r="$rep" \
        '{printf "RESULT overlap=%s np=%s rep=%s seconds=%s samples_per_s=%d load=%s\n", o, np, r, $1, S / $1, l}'
  done
done; done
exit 0
