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


for route in hier direct; do
  NETNS_ROUTE=$route netns_on_hosts "pairs_$route" 3 0 0 -- "$PAIRS" $PORT
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

NETNS_ROUTE=hier netns_on_hosts kill4 3 0 137 -- "$KILL" 4 "$WORK/killed4" alltoallv
netns_expect_peer_failed kill4 0 1 2 3 5

netns_finish "lazy TCP pairs across hosts: all phases passed"
