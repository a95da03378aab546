#!/usr/bin/env bash
# hb_comm_bench across two "hosts" on one machine: two network namespaces
# joined by a veth pair (tests/multihost/netns.sh), half the ranks in each,
# a TF_CONFIG cluster (chief in A, worker in B). Every configuration runs
# twice, interleaved: cpu_transport=tcp (TCP between every pair, as before
# the shared-memory transport) and auto (shared memory inside a namespace,
# TCP across: ranks that advertise different addresses are different
# hosts, although both namespaces share /dev/shm). Prints allreduce and the
# embedding-pattern alltoallv side by side, with auto's speedup over tcp,
# and each rank's transport per peer as hb logged it (HB_LOG_LEVEL=debug).
# Needs root (ip netns); the namespaces are deleted on exit.
#
#   bench/comm_bench/netns_compare.sh [BUILD_DIR]      (default: ./build)
#
# Knobs (environment): NPS="2 4" (even; half per namespace), REPEATS=1
# (table: median over launches), HB_SIZES (default 4K,64K,1M,16M),
# HB_SCALE (default 0.25), HB_TIME_BUDGET_S (default 2), as compare.sh.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../../build}" && pwd)
NPS=${NPS:-"2 4"}
REPEATS=${REPEATS:-1}
export HB_SCALE=${HB_SCALE:-0.25} HB_TIME_BUDGET_S=${HB_TIME_BUDGET_S:-2}
export HB_SIZES=${HB_SIZES:-"4K,64K,1M,16M"} HB_BENCH_FUSION=0

hbrun=$build/src/launcher/hbrun
bench=$build/bench/comm_bench/hb_comm_bench
for f in "$hbrun" "$bench"; do
  [[ -x $f ]] || { echo "missing $f (build hbrun and hb_comm_bench)" >&2; exit 2; }
done
for np in $NPS; do
  (( np >= 2 && np % 2 == 0 )) || { echo "NPS: $np is not even" >&2; exit 2; }
done

. "$here/../../tests/multihost/netns.sh"
why=$(netns_check) || { echo "netns_compare: $why" >&2; exit 2; }
ADDR_A=10.214.0.1 ADDR_B=10.214.0.2 PORT=29500
OUT=$(mktemp -d /tmp/hb_netns_compare.XXXXXX)
trap netns_destroy EXIT
trap 'exit 1' INT TERM HUP
netns_create "$ADDR_A" "$ADDR_B" || { echo "netns_compare: cannot set up the namespaces" >&2; exit 2; }

raw=$OUT/raw.txt transports=$OUT/transports.txt
: >"$raw"; : >"$transports"
# run TRANSPORT NP: one hbrun per namespace, NP/2 ranks each, both at once.
run() {
  local t=$1 np=$2 log=$OUT/$1.np$2.rep$rep
  ip netns exec "$NETNS_A" env TF_CONFIG="$(netns_tf_config "$ADDR_A" "$ADDR_B" "$PORT" chief)" \
    HB_CPU_TRANSPORT="$t" HB_LOG_LEVEL=debug \
    timeout 900 "$hbrun" -n $((np / 2)) --timeout 600 -- "$bench" >"$log.a" 2>&1 &
  local pa=$!
  ip netns exec "$NETNS_B" env TF_CONFIG="$(netns_tf_config "$ADDR_A" "$ADDR_B" "$PORT" worker)" \
    HB_CPU_TRANSPORT="$t" HB_LOG_LEVEL=debug \
    timeout 900 "$hbrun" -n $((np / 2)) --timeout 600 -- "$bench" >"$log.b" 2>&1 &
  local pb=$!
  wait "$pa"; local ca=$?
  wait "$pb"; local cb=$?
  if (( ca != 0 || cb != 0 )); then
    echo "FAILED: cpu_transport=$t np=$np (exit $ca/$cb; see $log.a, $log.b)" >&2
    return
  fi
  sed -n 's/^\(\[0\] \)\{0,1\}RESULT /RESULT /p' "$log.a" | sed "s/^RESULT /transport=$t rep=$rep /" >>"$raw"
  if (( rep == 1 )); then
    grep -h "cpu transport, rank" "$log.a" "$log.b" | sed 's/^.*cpu transport, //' | sort -n -k2 |
      sed "s/^/cpu_transport=$t np=$np: /" >>"$transports"
  fi
}
start=$(date +%s)
loads=("$(cut -d' ' -f1-3 /proc/loadavg)")
for rep in $(seq 1 "$REPEATS"); do
  for np in $NPS; do
    run tcp "$np"
    run auto "$np"
  done
  loads+=("$(cut -d' ' -f1-3 /proc/loadavg)")
done

/usr/bin/python3 - "$raw" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)  # (transport, impl, np, bytes) -> [median_us]
for line in open(sys.argv[1]):
    kv = dict(f.split("=", 1) for f in line.split())
    runs[(kv["transport"], kv["impl"], int(kv["np"]), int(kv["bytes"]))].append(float(kv["median_us"]))
med = {k: statistics.median(v) for k, v in runs.items()}
def size(b): return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
def busbw(us, b, np, impl):  # allreduce: nccl-tests' factor; alltoallv: algbw
    f = 2.0 * (np - 1) / np if impl == "hb_allreduce" else 1.0
    return b / (us * 1e-6) / 1e9 * f
keys = sorted({k[1:] for k in med}, key=lambda k: (k[1], k[0] != "hb_allreduce", k[0], k[2]))
print(f"{'np':>3} {'op':>17} {'size':>7} | {'tcp us':>10} {'GB/s':>7} | {'auto us':>10} {'GB/s':>7} | {'tcp/auto':>8}")
worst = None
for impl, np, b in keys:
    t, a = med.get(("tcp", impl, np, b)), med.get(("auto", impl, np, b))
    if t is None or a is None:
        continue
    worst = min(worst or t / a, t / a)
    print(f"{np:>3} {impl:>17} {size(b):>7} | {t:>10.1f} {busbw(t, b, np, impl):>7.3f} | "
          f"{a:>10.1f} {busbw(a, b, np, impl):>7.3f} | {t / a:>8.2f}")
print("tcp = cpu_transport=tcp (TCP between every pair); auto = shared memory inside a namespace,"
      " TCP across. tcp/auto > 1: auto is faster. Times: median over launches of the slowest"
      " rank's median call; allreduce GB/s is busbw (2(n-1)/n), alltoallv GB/s is algbw of the"
      " busiest rank's whole send (the size column).")
if worst is not None:
    print(f"lowest tcp/auto: {worst:.2f}")
PY
echo "Transport per peer pair, as each rank logged it:"
sed 's/^/  /' "$transports"
echo "Load averages (start, after each repeat): ${loads[*]}. Wall time: $(( $(date +%s) - start ))s. Raw: $raw"
