#!/usr/bin/env bash
# Two "hosts" on one machine: network namespaces joined by a veth pair,
# with only a private test address each (10.213.0.1 and 10.213.0.2) and
# loopback. A TF_CONFIG cluster with the chief on host A and a worker on
# host B, hbrun -n 2 on each (ranks 0-1 on A, 2-3 on B), runs:
#   every collective (mp_collectives sweep), an embedding table trained and
#   saved (mp_embedding save), then loaded and trained on (load), metrics
#   merged across hosts (mp_metrics), and a SIGKILL of rank 3 (host B) that
#   every other rank must see as HB_ERR_PEER_FAILED within 5 s (mh_kill).
# Each rank must advertise its own host's test address (never loopback).
# Needs root (ip netns); skips (exit 77) with the reason otherwise.
#   multihost_test.sh HBRUN MP_COLLECTIVES MP_EMBEDDING MP_METRICS MH_KILL
set -u
if [ $# -ne 5 ]; then
  echo "usage: $0 HBRUN MP_COLLECTIVES MP_EMBEDDING MP_METRICS MH_KILL" >&2
  exit 2
fi
HBRUN=$1 COLL=$2 EMB=$3 MET=$4 KILL=$5

skip() {
  echo "SKIP: $*"
  exit 77
}
. "$(dirname "$0")/netns.sh"
why=$(netns_check) || skip "$why"

ADDR_A=10.213.0.1 ADDR_B=10.213.0.2 PORT=29400
WORK=$(mktemp -d /tmp/hb_multihost.XXXXXX)
cleanup() {
  netns_destroy
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

netns_create "$ADDR_A" "$ADDR_B"
case $? in
  0) ;;
  2) skip "cannot create network namespaces here (ip netns add failed)" ;;
  *) echo "FAIL: setting up the namespaces and their veth pair failed"; exit 1 ;;
esac
A=$NETNS_A B=$NETNS_B

tf_config() {  # TYPE -> this host's TF_CONFIG
  netns_tf_config "$ADDR_A" "$ADDR_B" "$PORT" "$1"
}

failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# phase NAME WANT_A WANT_B -- program args: one hbrun per host, both at once;
# their exit codes must be WANT_A and WANT_B. Logs: $WORK/NAME.{a,b}.log.
phase() {
  local name=$1 want_a=$2 want_b=$3
  shift 4
  local start=$SECONDS
  echo "== $name: $*"
  ip netns exec "$A" env TF_CONFIG="$(tf_config chief)" HB_LOG_LEVEL="${LOG_LEVEL:-info}" \
    "$HBRUN" -n 2 --timeout 90 --grace-ms 10000 -- "$@" >"$WORK/$name.a.log" 2>&1 &
  local pa=$!
  ip netns exec "$B" env TF_CONFIG="$(tf_config worker)" HB_LOG_LEVEL="${LOG_LEVEL:-info}" \
    "$HBRUN" -n 2 --timeout 90 --grace-ms 10000 -- "$@" >"$WORK/$name.b.log" 2>&1 &
  local pb=$!
  wait "$pa"
  local ca=$?
  wait "$pb"
  local cb=$?
  echo "   host A exit $ca, host B exit $cb ($((SECONDS - start)) s)"
  if [ "$ca" != "$want_a" ] || [ "$cb" != "$want_b" ]; then
    fail "$name: exit codes $ca/$cb, expected $want_a/$want_b"
    sed "s/^/   A| /" "$WORK/$name.a.log" | tail -40
    sed "s/^/   B| /" "$WORK/$name.b.log" | tail -40
  fi
  # Each rank gives its peers its own host's address.
  for r in 0 1 2 3; do
    local want=$ADDR_A log=$WORK/$name.a.log
    if [ $r -ge 2 ]; then want=$ADDR_B log=$WORK/$name.b.log; fi
    grep -q "rank $r of 4: peers reach this rank at $want " "$log" ||
      fail "$name: rank $r did not advertise $want: $(grep "rank $r of 4: peers reach" "$log")"
  done
}

LOG_LEVEL=debug phase collectives 0 0 -- "$COLL" sweep
# The debug line naming each pair's transport: shared memory inside a host
# (its namespaces share /dev/shm), TCP across, though the segments of the
# other host's ranks could be opened (they advertise another address).
want_transport=("1:shm 2:tcp 3:tcp" "0:shm 2:tcp 3:tcp" "0:tcp 1:tcp 3:shm" "0:tcp 1:tcp 2:shm")
for r in 0 1 2 3; do
  line=$(grep -h "cpu transport, rank $r " "$WORK"/collectives.?.log)
  [[ $line == *"to each peer: ${want_transport[$r]}" ]] ||
    fail "collectives: rank $r transports: '$line', expected '${want_transport[$r]}'"
done
phase embedding_save 0 0 -- "$EMB" save "$WORK/ckpt"
phase embedding_load 0 0 -- "$EMB" load "$WORK/ckpt"
phase metrics 0 0 -- "$MET"
# Rank 3 dies by SIGKILL: its hbrun exits 137, the chief's hbrun 0.
phase kill 0 137 -- "$KILL" 3 "$WORK/killed_at"
netns_expect_peer_failed kill 0 1 2

if [ $failures -ne 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "multi-host: all phases passed"
