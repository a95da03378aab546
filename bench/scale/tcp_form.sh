#!/bin/bash
# Forming time of a TCP world on one host (issue 34: the Gloo mesh's
# bootstrap), before/after by hand, interleaved:
#   bench/scale/tcp_form.sh BUILD [NPS="8 16 32 64"] [RUNS=3] [BEFORE_LIBDIR]
# Each run: HB_CPU_TRANSPORT=tcp hbrun -n NP of tests/comm/mp_many_ranks
# (context, then the first allreduce, which connects the mesh; checked bit
# for bit). Prints, per NP and variant, the median of "first allreduce
# after" (rank 0's wall time from its start until its world has formed and
# reduced). BEFORE_LIBDIR: a directory holding another build's libhb.so.0,
# run through LD_LIBRARY_PATH (the binaries' RUNPATH comes after it).
set -u
build=${1:-_build}
nps=${2:-"8 16 32 64"}
runs=${3:-3}
before=${4:-}
hbrun=$build/src/launcher/hbrun
probe=$build/tests/comm/mp_many_ranks
one() {  # $1 = np, $2 = libdir or empty
  out=$(LD_LIBRARY_PATH=${2} HB_CPU_TRANSPORT=tcp "$hbrun" -n "$1" \
        --timeout 120 -- "$probe" 2>&1)
  line=$(echo "$out" | grep 'world of')
  [ -n "$line" ] || { echo "np=$1 FAILED: $(echo "$out" | tail -3)" >&2; echo 999; return; }
  echo "$line" | sed 's/.*first allreduce after \([0-9.]*\) s.*/\1/'
}
median() { sort -n | awk '{ t[NR] = $1 } END { print t[int((NR + 1) / 2)] }'; }
for np in $nps; do
  a=() b=()
  for i in $(seq 1 "$runs"); do
    [ -n "$before" ] && b+=("$(one "$np" "$before")")
    a+=("$(one "$np" "")")
  done
  if [ -n "$before" ]; then
    echo "np=$np before ${b[*]} (median $(printf '%s\n' "${b[@]}" | median)) after ${a[*]} (median $(printf '%s\n' "${a[@]}" | median)) s"
  else
    echo "np=$np ${a[*]} (median $(printf '%s\n' "${a[@]}" | median)) s"
  fi
done
