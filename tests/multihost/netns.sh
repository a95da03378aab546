# Two "hosts" on one machine: network namespaces joined by a veth pair, each
# with only loopback and one private address. Sourced by
# tests/multihost/multihost_test.sh and bench/comm_bench/netns_compare.sh.
#
#   netns_check                 prints why it cannot work here (not root, no
#                               ip(8)), returns 1; else returns 0
#   netns_create ADDR_A ADDR_B  creates them: NETNS_A holds ADDR_A/24,
#                               NETNS_B ADDR_B/24 (names unique per process);
#                               returns 2 if namespaces cannot be made here,
#                               1 if a later step failed
#   netns_destroy               kills what runs in them and deletes them
#                               (call it from an EXIT trap; idempotent)
#   netns_test_setup ADDR_A ADDR_B
#                               for a test script: netns_create, or exit 77
#                               (skip) saying why namespaces cannot be made
#                               here, or 1 if setting them up failed; makes
#                               $WORK; both go on exit (EXIT trap)

netns_check() {
  if [ "$(id -u)" != 0 ]; then
    echo "needs root to create network namespaces (ip netns)"
    return 1
  fi
  if ! command -v ip >/dev/null; then
    echo "ip (iproute2) is not installed"
    return 1
  fi
}

netns_create() {
  # Unique per process: concurrent runs never share a namespace or link.
  NETNS_A=hb_ns_a$$ NETNS_B=hb_ns_b$$ NETNS_VA=hbva$$ NETNS_VB=hbvb$$
  ip netns add "$NETNS_A" 2>/dev/null || return 2
  ip netns add "$NETNS_B" &&
    ip link add "$NETNS_VA" type veth peer name "$NETNS_VB" &&
    ip link set "$NETNS_VA" netns "$NETNS_A" &&
    ip link set "$NETNS_VB" netns "$NETNS_B" &&
    ip -n "$NETNS_A" addr add "$1/24" dev "$NETNS_VA" &&
    ip -n "$NETNS_B" addr add "$2/24" dev "$NETNS_VB" &&
    ip -n "$NETNS_A" link set lo up &&
    ip -n "$NETNS_B" link set lo up &&
    ip -n "$NETNS_A" link set "$NETNS_VA" up &&
    ip -n "$NETNS_B" link set "$NETNS_VB" up || return 1
}

netns_destroy() {
  [ -n "${NETNS_A:-}" ] || return 0
  local ns
  for ns in "$NETNS_A" "$NETNS_B"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  ip link del "$NETNS_VA" 2>/dev/null # gone with its namespace, unless moving failed
  NETNS_A=
}

# netns_tf_config ADDR_A ADDR_B PORT TYPE: the TF_CONFIG of a two-host
# cluster, the chief at ADDR_A, one worker at ADDR_B, for a task of TYPE.
netns_tf_config() {
  printf '{"cluster":{"chief":["%s:%d"],"worker":["%s:%d"]},"task":{"type":"%s","index":0}}' \
    "$1" "$3" "$2" "$3" "$4"
}

netns_test_setup() {
  local why
  why=$(netns_check) || { echo "SKIP: $why"; exit 77; }
  WORK=$(mktemp -d /tmp/hb_netns_test.XXXXXX)
  trap 'netns_destroy; rm -rf "$WORK"' EXIT
  trap 'exit 1' INT TERM HUP
  netns_create "$1" "$2"
  case $? in
    0) ;;
    2) echo "SKIP: cannot create network namespaces here (ip netns add failed)"; exit 77 ;;
    *) echo "FAIL: setting up the namespaces and their veth pair failed"; exit 1 ;;
  esac
}

# netns_on_hosts NAME NP WANT_A WANT_B -- PROGRAM ARGS...: hbrun -n NP of
# PROGRAM in each namespace at once (the chief, whose hbrun serves the
# store, in NETNS_A), with HB_LOG_LEVEL=debug, the routes of
# $NETNS_ROUTE (cpu_alltoallv and cpu_allreduce_route; auto if unset) and
# TF_CONFIG from ADDR_A, ADDR_B and PORT; output in $WORK/NAME.{a,b}.log.
# Calls the script's fail (and shows the logs' tails) unless the exit codes
# are WANT_A and WANT_B.
netns_on_hosts() {
  local name=$1 np=$2 want_a=$3 want_b=$4
  shift 5
  local start=$SECONDS pids=() codes=() ns host type
  local route=${NETNS_ROUTE:-auto}
  echo "== $name ($route): ${*##*/}"
  for host in a b; do
    ns=$NETNS_A type=chief
    [ $host = b ] && ns=$NETNS_B type=worker
    ip netns exec "$ns" env HB_LOG_LEVEL=debug HB_CPU_ALLTOALLV="$route" \
      HB_CPU_ALLREDUCE_ROUTE="$route" \
      TF_CONFIG="$(netns_tf_config "$ADDR_A" "$ADDR_B" "$PORT" $type)" \
      "$HBRUN" -n "$np" --timeout 90 --grace-ms 10000 -- "$@" \
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

# netns_expect_peer_failed NAME RANK...: each RANK reported
# HB_ERR_PEER_FAILED in $WORK/NAME.?.log (shows the lines; else fail).
netns_expect_peer_failed() {
  local name=$1 r line
  shift
  for r in "$@"; do
    line=$(grep -h "rank $r: HB_ERR_PEER_FAILED" "$WORK"/$name.?.log)
    if [ -n "$line" ]; then echo "   $line"; else fail "$name: rank $r did not report HB_ERR_PEER_FAILED"; fi
  done
}

# fail MESSAGE: one failure of a test script; netns_finish reports them.
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# netns_finish PASSED_LINE: exits 1 naming the count of failures, else
# prints PASSED_LINE.
netns_finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s)"
    exit 1
  fi
  echo "$1"
}
