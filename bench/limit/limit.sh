#!/usr/bin/env bash
# The CTR demo's step against its speed of light (bench/limit/limit.cc), one
# rank: per repeat, ctr_train --profile, then limit on the same shapes with
# that profile; REPEATS interleaved pairs. Run from the repository root:
#   bench/limit/limit.sh BUILD_DIR
# Environment: REPEATS=3, SAMPLES=240000, VOCAB=2048, BATCH=512.
set -eu
B=$(cd "$1" && pwd)
R=${REPEATS:-3}; S=${SAMPLES:-240000}; V=${VOCAB:-2048}; N=${BATCH:-512}
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
for rep in $(seq 1 "$R"); do
  line=$("$B/src/launcher/hbrun" -n 1 -- "$B/examples/ctr_train/ctr_train" --profile \
           --train-samples "$S" --vocab "$V" --batch "$N" --eval-samples 8000 \
           --eval-every 1000000 --max-gap 1 --out "$W/c" 2>&1 | grep 'profile rank 0:')
  echo "# repeat $rep: $line"
  "$B/bench/limit/limit" --batch "$N" --vocab "$V" --profile "$line"
done
