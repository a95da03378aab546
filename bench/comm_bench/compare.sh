#!/usr/bin/env bash
# Runs hb_comm_bench (through hbrun) and the peer harnesses of
# ../shared/peers (raw Gloo, Open MPI) in one session, interleaved, with
# the same sizes and definitions, and prints one side-by-side table.
#
#   bench/comm_bench/compare.sh [BUILD_DIR]      (default: ./build)
#
# Knobs (environment):
#   NPS="2 4"       process counts
#   REPEATS=1       launches per configuration (table: median of medians)
#   GLOO_ALGOS="ring,ring_chunked,halving_doubling,bcube"
#   MPI=1           also run Open MPI's MPI_Allreduce (mpi_default)
#   HB_SIZES, HB_SCALE (default 0.25), HB_TIME_BUDGET_S (default 2): as the
#                   peer harnesses
#   PEERS=<repo>/../shared/peers   OUT=<tmp dir>
#   VARIANTS="label:ENV=V,ENV=V[@LIBDIR] ..."   also run hb_comm_bench with
#                   these environment settings (and libhb from LIBDIR, e.g.
#                   an older build's src/), interleaved with the rest; a
#                   second table compares them with plain hb. Example:
#                   VARIANTS="nocheck:HB_CPU_CHECK_CALLS=0 tcp:HB_CPU_TRANSPORT=tcp"
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../../build}" && pwd)
NPS=${NPS:-"2 4"}
REPEATS=${REPEATS:-1}
GLOO_ALGOS=${GLOO_ALGOS:-"ring,ring_chunked,halving_doubling,bcube"}
MPI=${MPI:-1}
VARIANTS=${VARIANTS:-}
PEERS=${PEERS:-$(cd "$here/../../.." && pwd)/shared/peers}
OUT=${OUT:-$(mktemp -d /tmp/hb_comm_compare.XXXXXX)}
export HB_SCALE=${HB_SCALE:-0.25} HB_TIME_BUDGET_S=${HB_TIME_BUDGET_S:-2}
export HB_SIZES=${HB_SIZES:-"4K,64K,1M,16M,64M"}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

hbrun=$build/src/launcher/hbrun
bench=$build/bench/comm_bench/hb_comm_bench
for f in "$hbrun" "$bench"; do
  [[ -x $f ]] || { echo "missing $f (build hbrun and hb_comm_bench)" >&2; exit 2; }
done
make -s -C "$PEERS" BUILD="$OUT/peers" >/dev/null || { echo "peer build failed" >&2; exit 2; }

raw=$OUT/raw.txt log=$OUT/run.log
: >"$raw"; : >"$log"
run() {  # run <command...>: keep the RESULT lines, tagged with the repeat
  # (and with @$TAG on the implementation's name when TAG is set)
  echo "+ $*" >>"$log"
  timeout 900 "$@" 2>>"$log" | tee -a "$log" | sed -n 's/^\(\[0\] \)\{0,1\}RESULT /RESULT /p' \
    | sed "s/^RESULT /rep=$rep /; s/impl=\([^ ]*\)/impl=\1${TAG:+@$TAG}/" >>"$raw"
  (( PIPESTATUS[0] == 0 )) || echo "FAILED: $* (see $log)" >&2
}
run_variants() {  # run_variants <np>
  local v label spec lib envs
  for v in $VARIANTS; do
    label=${v%%:*} spec=${v#*:} lib=
    if [[ $spec == *@* ]]; then lib=${spec#*@} spec=${spec%@*}; fi
    IFS=, read -ra envs <<<"$spec"
    [[ -n $lib ]] && envs+=("LD_LIBRARY_PATH=$lib")
    TAG=$label run env "${envs[@]}" "$hbrun" -n "$1" --timeout 600 -- "$bench"
  done
}
start=$(date +%s)
loads=("$(cut -d' ' -f1-3 /proc/loadavg)")
for rep in $(seq 1 "$REPEATS"); do
  for np in $NPS; do
    run "$hbrun" -n "$np" --timeout 600 -- "$bench"
    run_variants "$np"
    run "$OUT/peers/gloo_bench" -n "$np" -a "$GLOO_ALGOS"
    if [[ $MPI == 1 ]]; then
      run mpirun --allow-run-as-root --oversubscribe -x HB_SIZES -x HB_SCALE -x HB_TIME_BUDGET_S \
        -np "$np" "$OUT/peers/mpi_bench" mpi_default
    fi
  done
  loads+=("$(cut -d' ' -f1-3 /proc/loadavg)")
done

/usr/bin/python3 - "$raw" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)  # (impl, np, bytes) -> [median_us per launch]
for line in open(sys.argv[1]):
    kv = dict(f.split("=", 1) for f in line.split())
    runs[(kv["impl"], int(kv["np"]), int(kv["bytes"]))].append(float(kv["median_us"]))
med = {k: statistics.median(v) for k, v in runs.items()}
def size(b): return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
def busbw(us, b, np): return b / (us * 1e-6) / 1e9 * (2.0 * (np - 1) / np)
nps = sorted({k[1] for k in med})
print(f"{'np':>3} {'size':>7} | {'hb us':>10} {'hb busbw':>9} | {'best Gloo':>22} {'us':>10} {'busbw':>7} "
      f"{'hb/Gloo':>7} {'hb-Gloo us':>10} | {'Gloo HD us':>10} {'hb/HD':>5} | {'MPI us':>10} {'busbw':>7} {'hb/MPI':>6}")
for np in nps:
    for b in sorted({k[2] for k in med if k[1] == np and k[0] == "hb_allreduce"}):
        hb = med[("hb_allreduce", np, b)]
        gloo = [(v, k[0]) for k, v in med.items() if k[0].startswith("gloo_") and k[1:] == (np, b)]
        g_us, g_name = min(gloo) if gloo else (float("nan"), "-")
        mpi = med.get(("mpi_default", np, b), float("nan"))
        hd = med.get(("gloo_halving_doubling", np, b), float("nan"))
        print(f"{np:>3} {size(b):>7} | {hb:>10.1f} {busbw(hb, b, np):>9.3f} | {g_name:>22} {g_us:>10.1f} "
              f"{busbw(g_us, b, np):>7.3f} {g_us / hb:>7.2f} {hb - g_us:>10.1f} | {hd:>10.1f} {hd / hb:>5.2f} | "
              f"{mpi:>10.1f} {busbw(mpi, b, np):>7.3f} {mpi / hb:>6.2f}")
for np in nps:
    fused = med.get(("hb_allreduce_many_256x4K", np, 1 << 20))
    sep = med.get(("hb_allreduce_256x4K_separate", np, 1 << 20))
    if fused and sep:
        print(f"np={np}: 256 x 4 KiB: hb_allreduce_many {fused:.1f} us vs 256 hb_allreduce {sep:.1f} us: {sep / fused:.1f}x")
variants = sorted({k[0].split("@", 1)[1] for k in med if "@" in k[0]})
if variants:
    print()
    print(f"{'np':>3} {'size':>7} {'case':>28} | {'hb us':>10} | " + " | ".join(f"{v[:18]:>18} us {'x hb':>5}" for v in variants))
    for np in nps:
        for impl, b in sorted({(k[0], k[2]) for k in med if k[1] == np and "@" not in k[0] and k[0].startswith("hb_")}):
            hb = med[(impl, np, b)]
            cells = []
            for v in variants:
                u = med.get((f"{impl}@{v}", np, b), float("nan"))
                cells.append(f"{u:>21.1f} {u / hb:>5.2f}")
            print(f"{np:>3} {size(b):>7} {impl[:28]:>28} | {hb:>10.1f} | " + " | ".join(cells))
    print("Variants (VARIANTS): the same benchmark with other settings or an older libhb; x hb = time / plain hb's time.")
print("hb/Gloo = busbw ratio against the fastest raw Gloo algorithm at that size (>= 0.9 is the target"
      " from 1 MiB); hb-Gloo us = per-call overhead; hb/HD = busbw ratio against raw Gloo"
      " halving-doubling (hb runs its own rank-order algorithm, docs/collectives.md). Times: median over"
      " launches of the slowest rank's median call. busbw = algbw*2(n-1)/n, GB/s = 1e9 B/s.")
PY
echo "Load averages (start, after each repeat): ${loads[*]}. Wall time: $(( $(date +%s) - start ))s. Raw: $raw, log: $log"
