#!/usr/bin/env bash
# A/B of the asynchronous collection exchange (docs/performance.md, "A real
# overlap"): the C++ CTR demo with HB_CPU_ASYNC_EXCHANGE=1 (lookup_start's
# rounds on the progress thread) and =0 (every round on the caller's
# thread), interleaved per world size and repeat, with the PyTorch
# table-wise peer beside them; one RESULT line per launch (ctr_compare.sh's,
# tagged async=0|1). Run from the repository root:
#   REPEATS=3 NPS="1 2 4" bench/ctr_cpu/overlap_ab.sh _build
# PEER= (empty) skips the peer. Other variables go to ctr_compare.sh
# (SAMPLES, VOCAB, LOAD).
set -u
cmp=${CTR_COMPARE:-../shared/peers/ctr_compare.sh}
R=${REPEATS:-3}; NPS=${NPS:-"1 2 4"}; PEER=${PEER-torch_tw}
for rep in $(seq 1 "$R"); do for np in $NPS; do
  for a in 1 0; do
    HB_CPU_ASYNC_EXCHANGE=$a NPS=$np REPEATS=1 IMPLS=hb_cpp "$cmp" "$1" |
      sed "s/^RESULT /RESULT async=$a /"
  done
  [ -n "$PEER" ] && NPS=$np REPEATS=1 IMPLS=$PEER "$cmp" "$1"
done; done
exit 0
