#!/bin/bash
# Forming time and sockets per rank of a world on two "hosts" (network
# namespaces joined by a veth pair, tests/multihost/netns.sh; needs root),
# NP/2 ranks each, before/after by hand, interleaved (issue 34: TCP pairs
# made on first use, none between ranks of one host):
#   bench/scale/netns_form.sh BUILD [NPS="8 16 32 64"] [RUNS=3] [BEFORE_LIBDIR] [ROUTE=auto]
# Each run: hbrun -n NP/2 in each namespace of tests/comm/mp_many_ranks
# (context, an allreduce of 1 float and one of 1000, bit-checked, a barrier;
# every rank prints the sockets it holds then). Prints per NP and variant
# the runs' "first allreduce after" of rank 0 (s) with their median, and
# the sockets per rank of the last run: min / median / max over ranks
# (each also holds its rendezvous connection, and its listener while
# pairs may still connect). ROUTE sets cpu_alltoallv and
# cpu_allreduce_route. BEFORE_LIBDIR: another build's libhb.so.0, through
# LD_LIBRARY_PATH.
set -u
build=${1:-_build}
nps=${2:-"8 16 32 64"}
runs=${3:-3}
before=${4:-}
route=${5:-auto}
hbrun=$(realpath "$build/src/launcher/hbrun")
probe=$(realpath "$build/tests/comm/mp_many_ranks")
. "$(dirname "$0")/../../tests/multihost/netns.sh"
why=$(netns_check) || { echo "needs: $why" >&2; exit 1; }
ADDR_A=10.216.0.1 ADDR_B=10.216.0.2 PORT=29412
trap 'netns_destroy' EXIT
netns_create "$ADDR_A" "$ADDR_B" || { echo "cannot make namespaces" >&2; exit 1; }
out=$(mktemp -d)
one() {  # $1 = np, $2 = libdir or empty; prints "seconds sockets..."
  local host ns type pids=()
  for host in a b; do
    ns=$NETNS_A type=chief
    [ $host = b ] && ns=$NETNS_B type=worker
    ip netns exec "$ns" env LD_LIBRARY_PATH="$2" MP_MANY_RANKS_EVERY=1 \
      HB_CPU_ALLTOALLV="$route" HB_CPU_ALLREDUCE_ROUTE="$route" \
      TF_CONFIG="$(netns_tf_config "$ADDR_A" "$ADDR_B" "$PORT" $type)" \
      "$hbrun" -n $(($1 / 2)) --timeout 120 -- "$probe" >"$out/$host" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
  local line
  line=$(grep -h 'world of' "$out"/a "$out"/b)
  [ -n "$line" ] || { echo "np=$1 FAILED: $(tail -3 "$out"/a "$out"/b)" >&2; echo 999; return; }
  echo "$line" | sed 's/.*first allreduce after \([0-9.]*\) s.*/\1/'
  grep -h 'rank [0-9]* holds [0-9]* sockets$' "$out"/a "$out"/b |
    sed 's/.*holds \([0-9]*\) sockets$/\1/' | sort -n | tr '\n' ' ' >"$out/sockets.$3"
}
median() { sort -n | awk '{ t[NR] = $1 } END { print t[int((NR + 1) / 2)] }'; }
spread() { awk '{ printf "%s / %s / %s", $1, $(int((NF + 1) / 2)), $NF }' "$1"; }
for np in $nps; do
  a=() b=()
  for i in $(seq 1 "$runs"); do
    [ -n "$before" ] && b+=("$(one "$np" "$before" before)")
    a+=("$(one "$np" "" after)")
  done
  if [ -n "$before" ]; then
    echo "np=$np before ${b[*]} (median $(printf '%s\n' "${b[@]}" | median) s; sockets per rank $(spread "$out/sockets.before")) after ${a[*]} (median $(printf '%s\n' "${a[@]}" | median) s; sockets per rank $(spread "$out/sockets.after"))"
  else
    echo "np=$np ${a[*]} (median $(printf '%s\n' "${a[@]}" | median) s; sockets per rank $(spread "$out/sockets.after"))"
  fi
done
rm -rf "$out"
