#!/usr/bin/env bash
# Interleaved A/B of two builds of libhb under the same C++ CTR demo
# (ctr_compare.sh's hb_cpp): the library in BASE_LIB_DIR (another build's
# src/, e.g. main's) and BUILD_DIR's own, in turn per world size and repeat;
# RESULT lines tagged lib=base|new (LD_LIBRARY_PATH wins over the demo's
# RUNPATH). Run from the repository root:
#   REPEATS=3 NPS="1 4" VOCAB=131072 bench/ctr_cpu/lib_ab.sh _build BASE_LIB_DIR
# Other variables go to ctr_compare.sh (SAMPLES, VOCAB, LOAD).
set -u
cmp=${CTR_COMPARE:-../shared/peers/ctr_compare.sh}
R=${REPEATS:-3}; NPS=${NPS:-1}
new=$(cd "$1" && pwd)/src; base=$(cd "$2" && pwd)
for rep in $(seq 1 "$R"); do for np in $NPS; do
  for lib in base new; do
    dir=$base; [ "$lib" = new ] && dir=$new
    LD_LIBRARY_PATH=$dir NPS=$np REPEATS=1 IMPLS=hb_cpp "$cmp" "$1" |
      sed "s/^RESULT /RESULT lib=$lib /"
  done
done; done
exit 0
