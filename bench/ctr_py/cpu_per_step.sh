#!/usr/bin/env bash
# CPU time per training step per process of the C++ and the Python CTR demo
# (ctr_compare.sh's flags), a signal that holds on a shared machine where
# wall time mostly measures the other tenants: every rank runs under
# /usr/bin/time twice, with SMALL and with SAMPLES train samples, and the
# difference of the two runs' user + system seconds over the difference of
# their steps is the cost of a step (start-up, evaluation and export cancel
# out). Interleaved per repeat: C++, Python (and PY_OLD, a second copy of
# examples/ctr_train_py, e.g. main's, when set). Run from the repository root:
#   bench/ctr_py/cpu_per_step.sh BUILD_DIR
# Environment: NPS="1 2 4", REPEATS=3, SAMPLES=240000, SMALL=24000,
# IMPLS="hb_cpp hb_py" (which demos), PY_OLD=DIR (optional), PY_FLAGS / PY_OLD_FLAGS (extra flags of the Python
# demo / of PY_OLD's, e.g. --no-prefetch), PY_BUILD=DIR (the binding's build
# for the Python demos; default BUILD_DIR). Prints a RESULT line per (repeat, impl, ranks):
# cpu_ms_per_step (mean over the ranks) and the large run's train seconds.
set -u
B=$(cd "$1" && pwd); HB_SRC=$(pwd); NPS=${NPS:-"1 2 4"}; R=${REPEATS:-3}
S=${SAMPLES:-240000}; SMALL=${SMALL:-24000}; PYB=${PY_BUILD:-$B}
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
common="--vocab 2048 --eval-samples 8000 --eval-every 1000000 --max-gap 1"
# run IMPL NP SAMPLES: prints "steps train_seconds cpu_seconds_summed_over_ranks".
run() {
  local impl=$1 np=$2 s=$3 cmd
  case $impl in
    hb_cpp) cmd=("$B/examples/ctr_train/ctr_train") ;;
    hb_py) cmd=(/usr/bin/python3 "$HB_SRC/examples/ctr_train_py/ctr_train.py" ${PY_FLAGS:-}) ;;
    hb_py_old) cmd=(/usr/bin/python3 "$PY_OLD/ctr_train.py" ${PY_OLD_FLAGS:-}) ;;
  esac
  (cd "$W" && PYTHONPATH="$PYB/bindings/python" timeout 900 "$B/src/launcher/hbrun" -n "$np" -- \
    /usr/bin/time -f "CPU %U %S" "${cmd[@]}" $common --train-samples "$s" --out "$W/out") \
    > "$W/log" 2>&1
  awk '/final: [0-9]+ steps in/ { for (i = 1; i <= NF; i++) { if ($i == "steps") st = $(i - 1);
         if ($i == "in") sec = $(i + 1) } }
       /CPU / { for (i = 1; i <= NF; i++) if ($i == "CPU") cpu += $(i + 1) + $(i + 2) }
       END { print st + 0, sec + 0, cpu + 0 }' "$W/log"
}
impls=${IMPLS:-"hb_cpp hb_py"}; [ -n "${PY_OLD:-}" ] && impls="$impls hb_py_old"
for rep in $(seq 1 "$R"); do for np in $NPS; do
  echo "# repeat $rep np $np: $(uptime)"
  for impl in $impls; do
    read -r st1 _ c1 < <(run "$impl" "$np" "$SMALL")
    read -r st2 sec2 c2 < <(run "$impl" "$np" "$S")
    awk -v i="$impl" -v np="$np" -v r="$rep" -v a="$st1" -v b="$st2" -v c="$c1" -v d="$c2" -v s="$sec2" \
      'BEGIN { printf "RESULT repeat=%d impl=%s np=%d cpu_ms_per_step=%.3f train_s=%s\n",
               r, i, np, (b > a ? 1e3 * (d - c) / np / (b - a) : -1), s }'
  done
done; done
echo "# end: $(uptime)"
