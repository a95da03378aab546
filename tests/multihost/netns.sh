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
