#!/usr/bin/env bash
# Where the C++ CTR demo's CPU goes at each world size (docs/performance.md,
# "What 2 ranks spend that 1 rank does not"): every rank runs under
# `perf record -e cpu-clock` (a software clock: no hardware counters needed,
# as on this VM), and the samples of all ranks are summed per function and
# per thread role (main = the rank's own thread; helpers = its progress and
# rendezvous threads). Printed as CPU us per training sample, so world sizes
# compare directly: at equal work per sample the rows match; what a larger
# world adds shows as the difference. The run includes start-up, evaluation
# and export (a few % at 240,000 samples). Run from the repository root:
#   NPS="1 2 4" bench/ctr_cpu/cpu_where.sh BUILD_DIR
# Environment: NPS="1 2", SAMPLES=240000, VOCAB=2048, TOP=25, FREQ=4000;
# TRAIN_ONLY=1: only each rank's training window (its first to its last
# sample in Trainer::backward), so start-up (table init, the generator's
# tables) and the final export and checkpoint drop out: at VOCAB=131072
# they are most of a whole run's CPU. HB_* options pass through to the ranks.
# DEMO=py: the numpy demo (PY_SRC's examples/ctr_train_py, default the
# current directory's, on BUILD_DIR's binding; its training window runs from
# the first to the last sample in the library's gradient expansion, as it
# has no C++ Trainer). FAULTS=1: every page fault is recorded too (perf's
# page-faults event, period 1), and a second table gives them per 512-sample
# step per rank by function (a freed and re-made large array faults its
# pages in again each step, and the kernel zeroes each: clear_page_*).
set -u
B=$(cd "$1" && pwd)
S=${SAMPLES:-240000}; V=${VOCAB:-2048}; NPS=${NPS:-"1 2"}; F=${FREQ:-4000}
PY_SRC=$(cd "${PY_SRC:-.}" && pwd)
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
command -v perf > /dev/null || { echo "perf not found" >&2; exit 1; }
events="-e cpu-clock/freq=$F/"; [ "${FAULTS:-0}" = 1 ] && events="$events -e page-faults/period=1/"
cat > "$W/rank.sh" <<'RANK'
#!/usr/bin/env bash
exec perf record -q $EVENTS -o "$PERF_OUT.${HB_RANK:-0}" -- "$@"
RANK
chmod +x "$W/rank.sh"
demo=("$B/examples/ctr_train/ctr_train"); mark=Trainer::backward
if [ "${DEMO:-cpp}" = py ]; then
  demo=(/usr/bin/python3 "$PY_SRC/examples/ctr_train_py/ctr_train.py"); mark=Collection::expand_grads
fi
# table EVENT SCALE: the rows of that event's samples, each count times SCALE.
table() {
  awk -F'\t' -v ev="$1" -v K="$2" -v np="$np" -v top="${TOP:-25}" '
    $1 != ev { next }
    { us = $2 * K; tot += us; role[$3] += us; sym[$4] += us
      if ($4 ~ /^\[k\]/) kern += us }
    END { printf "| %d | all | %.3f |\n| %d | main | %.3f |\n| %d | helpers | %.3f |\n| %d | kernel | %.3f |\n",
            np, tot, np, role["main"], np, role["helpers"], np, kern
          n = 0; for (k in sym) { key[++n] = k }
          for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
            if (sym[key[j]] > sym[key[i]]) { t = key[i]; key[i] = key[j]; key[j] = t }
          for (i = 1; i <= n && i <= top; i++) printf "| %d | %s | %.3f |\n", np, substr(key[i], 1, 80), sym[key[i]] }' "$W/rows"
}
for np in $NPS; do
  rm -f "$W"/perf.*
  (cd "$W" && EVENTS=$events PERF_OUT="$W/perf" PYTHONPATH="$B/bindings/python" \
    "$B/src/launcher/hbrun" -n "$np" -- "$W/rank.sh" "${demo[@]}" --train-samples "$S" \
    --vocab "$V" --eval-samples 8000 --eval-every 1000000 --max-gap 1 --out "$W/out") \
    > "$W/log" 2>&1 || { echo "np $np failed:" >&2; tail -5 "$W/log" >&2; exit 1; }
  for f in "$W"/perf.*; do
    win=()
    [ "${TRAIN_ONLY:-0}" = 1 ] && win=(--time "$(perf script -i "$f" -F time,ip,sym 2> /dev/null |
      awk -v m="$mark" 'index($0, m) { t = $1; sub(":", "", t); if (!a) a = t; b = t } END { print a "," b }')")
    # The main thread's tid is the process id, the lowest of its threads;
    # one section per event (its header names it).
    perf report -i "$f" "${win[@]}" --no-children --sort pid,sym -n --stdio 2> /dev/null |
      awk "/^# Samples: .* of event '/ { ev = (\$0 ~ /page-faults/) ? \"faults\" : \"clock\" }
           "'/^ *[0-9.]+%/ { split($3, p, ":"); t = p[1] + 0
             if (!main || t < main) main = t
             n = $2; $1 = ""; $2 = ""; $3 = ""; sub(/^ +/, "")
             tid[++k] = t; cnt[k] = n; sym[k] = $0; evk[k] = ev }
           END { for (i = 1; i <= k; i++)
                   print evk[i] "\t" cnt[i] "\t" (tid[i] == main ? "main" : "helpers") "\t" sym[i] }'
  done > "$W/rows"
  echo "# np $np ${DEMO:-cpp}: $(sed -n 's/.*final: \([0-9]* steps in [0-9.]* s\).*/\1/p' "$W/log" | head -1); $(cut -d' ' -f1-3 /proc/loadavg)"
  table clock "$(awk -v F="$F" -v S="$S" 'BEGIN { print 1e6 / F / S }')"
  if [ "${FAULTS:-0}" = 1 ]; then
    echo "# np $np: page faults per 512-sample step per rank"
    table faults "$(awk -v S="$S" 'BEGIN { print 512 / S }')"
  fi
done
