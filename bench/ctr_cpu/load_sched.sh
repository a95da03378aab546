#!/usr/bin/env bash
# Where a nice-19 busy loop (ctr_compare.sh's LOAD=1) costs the C++ CTR demo
# its time (docs/performance.md, "What a nice-19 busy loop costs"): per
# repeat and world size, one job without and one with the loop, back to
# back (interleaved), ctr_compare.sh's flags. Beside samples/s, per rank and
# thread (main = the rank's own thread; other = its helper threads, e.g. the
# progress threads) per training step: CPU ms, run delay ms (runnable but
# not running: /proc/<pid>/task/<tid>/schedstat), sleeps (voluntary
# context switches) and preemptions (involuntary ones), read every 100 ms
# while the rank runs (each thread's last reading counts); and the loop's CPU share.
# With SLICE_US=n a third job per repeat and world size runs beside the loop
# with every rank under hb_with_slice n (a custom scheduler slice of n us,
# inherited by the rank's threads). Run from the repository root:
#   REPEATS=3 NPS="1 2" [SLICE_US=100] bench/ctr_cpu/load_sched.sh _build
# Environment: SAMPLES=240000, VOCAB=2048, NPS="1 2", REPEATS=3; other HB_*
# options pass through to the ranks (e.g. HB_CPU_WAIT_SPIN_US).
set -u
B=$(cd "$1" && pwd)
S=${SAMPLES:-240000}; V=${VOCAB:-2048}; R=${REPEATS:-3}; NPS=${NPS:-"1 2"}
W=$(mktemp -d); BG=""
trap '[ -n "$BG" ] && kill $BG 2>/dev/null; rm -rf "$W"' EXIT
# The per-rank sampler: runs the rank, copies its threads' counters to
# $W/snap.<rank> every 100 ms ("tid main|other cpu_ns delay_ns vcs ivcs").
cat > "$W/rank.sh" <<'RANK'
#!/usr/bin/env bash
"$@" & pid=$!
out=$SNAP.${HB_RANK:-0}
declare -A last  # tid -> its latest counters: a thread that ended keeps its own
while kill -0 $pid 2>/dev/null; do
  for t in /proc/$pid/task/*; do
    read -r c d _ < "$t/schedstat" 2>/dev/null || continue
    v="" # builtins only: the sampler must not cost the ranks much
    while read -r key val; do
      case $key in voluntary_ctxt_switches:|nonvoluntary_ctxt_switches:) v+="$val ";; esac
    done < "$t/status" 2>/dev/null
    tid=${t##*/}; role=other; [ "$tid" = "$pid" ] && role=main
    last[$tid]="$tid $role $c $d $v"
  done
  printf '%s\n' "${last[@]}" > "$out.tmp" && mv "$out.tmp" "$out"
  sleep 0.1
done
wait $pid
RANK
chmod +x "$W/rank.sh"
job() {  # load slice_us np -> prints the rows of one job
  local load=$1 slice=$2 np=$3 run=()
  [ "$slice" -gt 0 ] && run=("${WITH_SLICE:-$B/bench/ctr_cpu/hb_with_slice}" "$slice")
  rm -f "$W"/snap.*
  [ "$load" = 1 ] && { nice -n 19 sh -c 'while :; do :; done' & BG=$!; sleep 0.2; }
  local t0; t0=$(date +%s.%N)
  SNAP="$W/snap" "$B/src/launcher/hbrun" -n "$np" -- "$W/rank.sh" "${run[@]}" \
    "$B/examples/ctr_train/ctr_train" --train-samples "$S" --vocab "$V" \
    --eval-samples 8000 --eval-every 1000000 --max-gap 1 --out "$W/out" \
    > "$W/log" 2>&1
  local loop="-"
  if [ -n "$BG" ]; then
    read -r lc _ < /proc/$BG/schedstat
    loop=$(awk -v c="$lc" -v t0="$t0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%.1f%%", c / 1e7 / (t1 - t0) }')
    kill $BG; wait $BG 2>/dev/null; BG=""
  fi
  read -r steps secs < <(sed -n 's/.*final: \([0-9]*\) steps in \([0-9.]*\) s.*/\1 \2/p' "$W/log" | head -1)
  [ -n "${secs:-}" ] || { echo "a job failed:" >&2; tail -5 "$W/log" >&2; exit 1; }
  for f in "$W"/snap.*; do
    awk -v n="$steps" -v np="$np" -v load="$load$([ "$slice" -gt 0 ] && echo " +slice ${slice}us")" -v S="$S" -v t="$secs" -v loop="$loop" -v r="${f##*.}" '
      { k = $2; c[k] += $3; d[k] += $4; v[k] += $5; i[k] += $6; th[k]++ }
      END { for (k in th) printf "| %s | %d | %.0f | %s | %s | %s x%d | %.3f | %.3f | %.2f | %.2f |\n",
              load, np, S / t, loop, r, k, th[k], c[k] / 1e6 / n, d[k] / 1e6 / n, v[k] / n, i[k] / n }' "$f"
  done
}
echo "# $(date -u +%H:%M) load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| loop | ranks | samples/s | loop's CPU | rank | threads | CPU ms/step | run delay ms/step | sleeps/step | preemptions/step |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for rep in $(seq 1 "$R"); do for np in $NPS; do
  job 0 0 "$np" || exit 1
  job 1 0 "$np" || exit 1
  if [ "${SLICE_US:-0}" -gt 0 ]; then job 1 "$SLICE_US" "$np" || exit 1; fi
done; done
echo "# $(date -u +%H:%M) load average $(cut -d' ' -f1-3 /proc/loadavg)"
