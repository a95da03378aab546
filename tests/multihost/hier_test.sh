#!/usr/bin/env bash
# The hierarchical alltoallv (src/comm/hier_alltoallv.h) and rank-order
# reductions (src/comm/hier_reduce.h) across two "hosts" (network
# namespaces joined by a veth pair, tests/multihost/netns.sh), 2 ranks
# each: every collection exchange and dense allreduce routed through one
# leader per host must give the same bits as the direct route.
#   - mp_collection train (bit-equal to its single-process reference) with
#     cpu_alltoallv=cpu_allreduce_route=hier and both =direct; the tables it
#     exports byte-identical;
#   - the CTR demo (ctr_train) trained with each route: its exported tables
#     byte-identical, and the same digest of the final state (its MLP's
#     weights: the dense allreduce gave the same bits);
#   - the route each rank took, from its debug log;
#   - a SIGKILL of rank 1 (not a leader) and of rank 2 (host B's leader)
#     while every rank loops on hierarchical alltoallv calls: every other
#     rank reports HB_ERR_PEER_FAILED naming it within 5 s (mh_kill); and
#     of rank 2 while every rank loops on hierarchical allreduces.
# Needs root (ip netns); skips (exit 77) with the reason otherwise.
#   hier_test.sh HBRUN MP_COLLECTION CTR_TRAIN MH_KILL
set -u
if [ $# -ne 4 ]; then
  echo "usage: $0 HBRUN MP_COLLECTION CTR_TRAIN MH_KILL" >&2
  exit 2
fi
HBRUN=$1 COLL=$2 CTR=$3 KILL=$4

. "$(dirname "$0")/netns.sh"
ADDR_A=10.214.0.1 ADDR_B=10.214.0.2 PORT=29410
netns_test_setup "$ADDR_A" "$ADDR_B"


# on_hosts NAME ROUTE WANT_A WANT_B -- program args: hbrun -n 2 on each
# host with cpu_alltoallv=cpu_allreduce_route=ROUTE; exit codes must be
# WANT_A and WANT_B.
on_hosts() {
  local name=$1 route=$2 want_a=$3 want_b=$4
  shift 4
  NETNS_ROUTE=$route netns_on_hosts "$name" 2 "$want_a" "$want_b" "$@"
  # The route every rank took.
  local want=hierarchical
  [ "$route" = direct ] && want=direct
  for r in 0 1 2 3; do
    grep -qh "cpu alltoallv, rank $r: $want; reductions: $want" \
      "$WORK/$name".?.log ||
      fail "$name: rank $r did not take the $want routes"
  done
}

CTR_ARGS=(--train-samples 6000 --eval-samples 500 --batch 128 --lr 0.2
  --vocab 2048 --seed 5 --log-every 1000 --eval-every 1000 --max-gap 1
  --digest)
for route in hier direct; do
  mkdir -p "$WORK/coll_$route"
  on_hosts "coll_$route" $route 0 0 -- "$COLL" train "$WORK/coll_$route"
  on_hosts "ctr_$route" $route 0 0 -- "$CTR" "${CTR_ARGS[@]}" \
    --out "$WORK/ctr_$route"
done
n=0
for f in "$WORK"/coll_direct/*.hbe; do
  cmp -s "$f" "$WORK/coll_hier/${f##*/}" || fail "collection export ${f##*/} differs"
  n=$((n + 1))
done
[ $n -gt 0 ] || fail "mp_collection exported no table"
echo "   $n collection tables byte-identical"
n=0
while IFS= read -r -d '' f; do
  rel=${f#"$WORK"/ctr_direct/}
  cmp -s "$f" "$WORK/ctr_hier/$rel" || fail "ctr_train export $rel differs"
  n=$((n + 1))
done < <(find "$WORK/ctr_direct" -type f -name '*.hbe' -print0)
[ $n -gt 0 ] || fail "ctr_train exported no table"
echo "   $n CTR demo tables byte-identical"
dh=$(grep -h 'digest:' "$WORK"/ctr_hier.?.log)
dd=$(grep -h 'digest:' "$WORK"/ctr_direct.?.log)
[ -n "$dh" ] && [ "$dh" = "$dd" ] && echo "   $dh" || fail "ctr_train digests: '$dh' vs '$dd'"

# Kills: host A's hbrun exits 137 when its rank 1 dies, host B's when 2.
# VICTIM[:allreduce]: an alltoallv loop, or an allreduce loop.
for kill in 1 2 2:allreduce; do
  victim=${kill%%:*} name=kill${kill/:/_} loop=alltoallv
  [ "$kill" != "$victim" ] && loop=
  want_a=0 want_b=137
  [ $victim = 1 ] && want_a=137 want_b=0
  on_hosts "$name" hier $want_a $want_b -- "$KILL" $victim \
    "$WORK/killed_$name" $loop
  others=()
  for r in 0 1 2 3; do [ $r = $victim ] || others+=($r); done
  netns_expect_peer_failed "$name" "${others[@]}"
done

netns_finish "hierarchical alltoallv and reductions across hosts: all phases passed"
