#!/usr/bin/env bash
# The Python CTR demo pipelined against --no-pipeline and the C++ demo,
# interleaved (per repeat and world size: C++, Python, Python --no-pipeline),
# with ctr_compare.sh's flags and --profile. Prints a RESULT line per launch
# (train seconds: Python / C++ speed = C++ seconds / Python seconds) and
# every rank's profile line. Run from the repository root:
#   bench/ctr_py/pipeline_compare.sh BUILD_DIR
# Environment: NPS="2 4", REPEATS=3, SAMPLES=240000.
set -u
B=$(cd "$1" && pwd); HB_SRC=$(pwd); NPS=${NPS:-"2 4"}; R=${REPEATS:-3}; S=${SAMPLES:-240000}
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
common="--train-samples $S --vocab 2048 --eval-samples 8000 --eval-every 1000000 --max-gap 1 --profile"
res() { sed -n "s/.*final: \([0-9]*\) steps in \([0-9.]*\) s.*/RESULT impl=$1 np=$2 seconds=\2/p" "$W/log"
        grep "profile rank" "$W/log"; }
for rep in $(seq 1 "$R"); do for np in $NPS; do
  echo "# repeat $rep np $np: $(uptime)"
  timeout 900 "$B/src/launcher/hbrun" -n "$np" -- "$B/examples/ctr_train/ctr_train" $common \
    --out "$W/c" > "$W/log" 2>&1; res hb_cpp "$np"
  for p in "" --no-pipeline; do
    (cd "$HB_SRC/examples/ctr_train_py" && PYTHONPATH="$B/bindings/python" timeout 900 \
      "$B/src/launcher/hbrun" -n "$np" -- /usr/bin/python3 ctr_train.py $common $p --out "$W/py") \
      > "$W/log" 2>&1; res "hb_py$p" "$np"
  done
done; done
echo "# end: $(uptime)"
