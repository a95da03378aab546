#!/usr/bin/env bash
# The CTR-shaped step's per-rank costs (bench/step_cost/step_cost.cc) for
# the model of docs/scaling.md:
#   - on this host at NPS_LOCAL ranks (default "2 4 8 16": oversubscribed,
#     so times bound per-message costs from above);
#   - across two network namespaces (tests/multihost/netns.sh) at
#     2 hosts x PER_HOST ranks (default "1 2 4"), on each of ROUTES
#     (cpu_alltoallv/cpu_allreduce_route; default "direct/direct
#     hier/direct hier/hier"), interleaved, REPEATS times (median step
#     time).
# Prints, per configuration, the mean and max over ranks of collective
# calls, TCP and shared-memory messages and bytes per step, and the step
# time. Needs root for the namespaces (skips that part otherwise).
#   bench/step_cost/step_cost.sh [BUILD_DIR]      (default: ./_build)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../../_build}" && pwd)
NPS_LOCAL=${NPS_LOCAL:-"2 4 8 16"}
PER_HOST=${PER_HOST:-"1 2 4"}
REPEATS=${REPEATS:-3}
ROUTES=${ROUTES:-"direct/direct hier/direct hier/hier"}
hbrun=$build/src/launcher/hbrun
prog=$build/bench/step_cost/step_cost
for f in "$hbrun" "$prog"; do
  [[ -x $f ]] || { echo "missing $f (build hbrun and step_cost)" >&2; exit 2; }
done
OUT=$(mktemp -d /tmp/hb_step_cost.XXXXXX)
raw=$OUT/raw.txt
: >"$raw"

# summarize LABEL LOG...: one line from the ranks' STEP lines.
summarize() {
  local label=$1
  shift
  grep -h '^\(\[[0-9]*\] \)\{0,1\}STEP ' "$@" | sed 's/^\[[0-9]*\] //' |
    awk -v label="$label" '{
      for (i = 2; i <= NF; ++i) { split($i, kv, "="); v[kv[1]] = kv[2] }
      n++; for (k in v) if (k != "route") { s[k] += v[k]; if (v[k] > m[k]) m[k] = v[k] }
    } END {
      if (!n) { print label " FAILED"; exit }
      printf "%s np=%d calls=%.1f tcp_msgs=%.1f/%.1f tcp_bytes=%.0f/%.0f shm_msgs=%.1f/%.1f shm_bytes=%.0f/%.0f step_us=%.0f\n",
        label, m["np"], s["calls"]/n, s["tcp_msgs"]/n, m["tcp_msgs"], s["tcp_bytes"]/n, m["tcp_bytes"],
        s["shm_msgs"]/n, m["shm_msgs"], s["shm_bytes"]/n, m["shm_bytes"], m["step_us"] }' | tee -a "$raw"
}

echo "== one host (mean/max over ranks, per step)"
for np in $NPS_LOCAL; do
  log=$OUT/local.np$np
  timeout 600 "$hbrun" -n "$np" --timeout 300 -- "$prog" >"$log" 2>&1 ||
    echo "FAILED: one host np=$np (see $log)"
  summarize "local" "$log"
done

. "$here/../../tests/multihost/netns.sh"
if ! why=$(netns_check); then
  echo "skipping the two-namespace runs: $why"
  exit 0
fi
ADDR_A=10.215.0.1 ADDR_B=10.215.0.2 PORT=29520
trap netns_destroy EXIT
trap 'exit 1' INT TERM HUP
netns_create "$ADDR_A" "$ADDR_B" || { echo "cannot set up the namespaces" >&2; exit 2; }
# two_hosts ALLTOALLV/ALLREDUCE PER_HOST LOG: hbrun -n PER_HOST in each
# namespace.
two_hosts() {
  local route=$1 k=$2 log=$3 pids=() ns type
  for ns in "$NETNS_A" "$NETNS_B"; do
    type=chief
    [ "$ns" = "$NETNS_B" ] && type=worker
    ip netns exec "$ns" env TF_CONFIG="$(netns_tf_config "$ADDR_A" "$ADDR_B" "$PORT" $type)" \
      HB_CPU_ALLTOALLV="${route%/*}" HB_CPU_ALLREDUCE_ROUTE="${route#*/}" timeout 600 "$hbrun" -n "$k" --timeout 300 -- "$prog" \
      >"$log.$type" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || echo "FAILED: $route 2x$k (see $log.*)"; done
}
echo "== two hosts (namespaces), routes (cpu_alltoallv/cpu_allreduce_route) $ROUTES, $REPEATS interleaved launches"
for rep in $(seq 1 "$REPEATS"); do
  for k in $PER_HOST; do
    for route in $ROUTES; do
      log=$OUT/2x$k.${route/\//-}.rep$rep
      two_hosts $route "$k" "$log"
      summarize "2x$k $route rep$rep" "$log".*
    done
  done
done
echo "== medians over launches (step_us); counts are the same every launch"
for k in $PER_HOST; do
  for route in $ROUTES; do
    grep "^2x$k $route " "$raw" | sed 's/.*step_us=//' | sort -n |
      awk -v l="2x$k $route" '{ t[NR] = $1 } END { if (NR) printf "%s: median step %d us over %d launches\n", l, t[int((NR + 1) / 2)], NR }'
  done
done
echo "raw: $raw"
