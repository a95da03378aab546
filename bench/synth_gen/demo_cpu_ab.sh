#!/usr/bin/env bash
# Interleaved A/B of two builds of the C++ CTR demo by CPU per step, which
# holds on a shared machine where wall time mostly measures the others:
# `ctr_train --profile` prints per rank the CPU ms per step of the prefetch
# thread (the data generation) and of the whole process. Per VOCAB and
# world size, REPEATS rounds of A then B; prints the medians (over rounds
# of the mean over ranks) of gen (prefetch thread), process CPU ms per step
# and the train samples/s, and B/A. Run from the repository root:
#   bench/synth_gen/demo_cpu_ab.sh HBRUN CTR_TRAIN_A CTR_TRAIN_B
# Environment: VOCABS="2048 131072", NPS="1 2", SAMPLES=240000, REPEATS=3.
set -u
H=$1; A=$2; B=$3; S=${SAMPLES:-240000}; R=${REPEATS:-3}
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
med() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
for v in ${VOCABS:-2048 131072}; do for np in ${NPS:-1 2}; do
  for rep in $(seq 1 "$R"); do for side in A B; do
    bin=$A; [ $side = B ] && bin=$B
    timeout 300 "$H" -n "$np" -- "$bin" --train-samples "$S" --vocab "$v" --eval-samples 8000 \
      --eval-every 1000000 --max-gap 1 --profile --out "$W/out" > "$W/log" 2>&1 ||
      { echo "vocab $v np $np $side failed:" >&2; tail -3 "$W/log" >&2; exit 1; }
    awk -v S="$S" '/profile cpu rank/ { for (i = 1; i <= NF; i++) { if ($i == "thread") g += $(i + 1)
                                          if ($i == "process") p += $(i + 1) }; n++ }
         /final: [0-9]+ steps in/ { for (i = 1; i <= NF; i++) if ($i == "in") sec = $(i + 1) }
         END { print g / n, p / n, S / sec }' "$W/log" >> "$W/$side"
  done; done
  for side in A B; do
    for k in 1 2 3; do cut -d' ' -f$k "$W/$side" | med; done | paste -sd' ' > "$W/$side.med"
    rm -f "$W/$side"
  done
  read -r ga pa sa < "$W/A.med"; read -r gb pb sb < "$W/B.med"
  awk -v v="$v" -v np="$np" -v ga="$ga" -v pa="$pa" -v sa="$sa" -v gb="$gb" -v pb="$pb" -v sb="$sb" 'BEGIN {
    printf "vocab %d np %d: gen cpu ms/step A %.3f B %.3f (B/A %.2f); process cpu ms/step A %.3f B %.3f (B/A %.2f); samples/s A %.0f B %.0f (B/A %.2f)\n",
      v, np, ga, gb, gb / ga, pa, pb, pb / pa, sa, sb, sb / sa }'
done; done
