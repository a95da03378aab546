#!/usr/bin/env bash
# TCP pairs made on first use (src/comm/mesh_connect.h, docs/scaling.md)
# across two "hosts" (network namespaces joined by a veth pair,
# tests/multihost/netns.sh) of 3 ranks each: every rank's established TCP
# sockets but the rendezvous store's (mh_pairs), after hb_context_create
# and a barrier (none: the CPU communicator forms at the first collective)
# and after an allreduce and an alltoallv:
#   - no socket between two ranks of one host (main's full mesh: 4 per
#     rank, and 6 to the other host, on both routes);
#   - after the calls, through the leaders (cpu_alltoallv =
#     cpu_allreduce_route = hier): 2 on each leader (one per Gloo context),
#     none on the others; direct: 2 per rank of the other host (6);
#   - a SIGKILL of rank 4 (not a leader) while the ranks loop on
#     hierarchical alltoallv calls: every other rank reports
#     HB_ERR_PEER_FAILED (mh_kill).
# Needs root (ip netns); skips (exit 77) with the reason otherwise.
#   lazy_pairs_test.sh HBRUN MH_PAIRS MH_KILL
set -u
if [ $# -ne 3 ]; then
  echo "usage: $0 HBRUN MH_PAIRS MH_KILL" >&2
  exit 2
fi
HBRUN=$1 PAIRS=$2 KILL=$3

. "$(dirname "$0")/netns.sh"
ADDR_A=10.215.0.1 ADDR_B=10.215.0.2 PORT=29411
netns_test_setup "$ADDR_A" "$ADDR_B"

failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# on_hosts NAME ROUTE WANT_A WANT_B -- program args: hbrun -n 3 on each
# host; exit codes must be WANT_A and WANT_B.
on_hosts() {
  local name=$1 route=$2 want_a=$3 want_b=$4
  shift 5
  local start=$SECONDS pids=() codes=() ns host type
  echo "== $name ($route): ${*##*/}"
  for host in a b; do
    ns=$NETNS_A type=chief
    [ $host = b ] && ns=$NETNS_B type=worker
    ip netns exec "$ns" env HB_LOG_LEVEL=debug HB_CPU_ALLTOALLV="$route" \
      HB_CPU_ALLREDUCE_ROUTE="$route" \
      TF_CONFIG="$(netns_tf_config "$ADDR_A" "$ADDR_B" "$PORT" $type)" \
      "$HBRUN" -n 3 --timeout 60 --grace-ms 10000 -- "$@" \
      >"$WORK/$name.$host.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do
    wait "$p"
    codes+=($?)
  done
  echo "   exit ${codes[0]}/${codes[1]} ($((SECONDS - start)) s)"
  if [ "${codes[0]}" != "$want_a" ] || [ "${codes[1]}" != "$want_b" ]; then
    fail "$name: exit codes ${codes[0]}/${codes[1]}, expected $want_a/$want_b"
    tail -n 30 "$WORK/$name.a.log" "$WORK/$name.b.log" | grep -v " DEBUG "
  fi
}

for route in hier direct; do
  on_hosts "pairs_$route" $route 0 0 -- "$PAIRS" $PORT
  for r in 0 1 2 3 4 5; do
    line=$(grep -h "mh_pairs rank $r:" "$WORK"/pairs_$route.?.log |
      sed 's/^\[[0-9]*\] //')  # hbrun's prefix
    echo "   $line"
    want=6
    [ $route = hier ] && { want=0; [ $r = 0 ] || [ $r = 3 ]; } && want=2
    [ "$line" = "mh_pairs rank $r: formed same-host 0 other-host 0; after calls same-host 0 other-host $want" ] ||
      fail "pairs_$route: rank $r: '$line', expected none formed and $want to the other host after"
  done
done

on_hosts kill4 hier 0 137 -- "$KILL" 4 "$WORK/killed4" alltoallv
for r in 0 1 2 3 5; do
  line=$(grep -h "rank $r: HB_ERR_PEER_FAILED" "$WORK"/kill4.?.log)
  if [ -n "$line" ]; then echo "   $line"; else fail "kill4: rank $r did not report HB_ERR_PEER_FAILED"; fi
done

if [ $failures -ne 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "lazy TCP pairs across hosts: all phases passed"
