#!/bin/bash
# Many ranks on one host (issue 34 item 3), by hand:
#   bench/scale/many_ranks.sh [BUILD=_build] [NP=128] [RUNS=20]
# Each run: hbrun -n NP of tests/comm/mp_many_ranks (context, allreduce of 1
# and of 1000 floats checked bit for bit against the rank-order sum, barrier,
# at most 4 sockets per rank). Prints each run's wall time and the summary;
# exits 1 if any run failed or took 10 s or more.
set -u
build=${1:-_build}
np=${2:-128}
runs=${3:-20}
hbrun=$build/src/launcher/hbrun
probe=$build/tests/comm/mp_many_ranks
[ -x "$hbrun" ] || hbrun=$(find "$build" -name hbrun -type f -perm -u+x | head -1)
bad=0
times=()
for i in $(seq 1 "$runs"); do
  t0=$(date +%s.%N)
  out=$("$hbrun" -n "$np" --timeout 120 -- "$probe" 4 2>&1)
  rc=$?
  t=$(echo "$(date +%s.%N) - $t0" | bc)
  times+=("$t")
  line=$(echo "$out" | grep 'world of' | head -1)
  printf 'run %2d: rc=%d wall %6.2f s  %s\n' "$i" "$rc" "$t" "$line"
  if [ "$rc" -ne 0 ]; then
    echo "$out" | grep -v '^$' | tail -5
    bad=$((bad + 1))
  elif [ "$(echo "$t >= 10" | bc)" = 1 ]; then
    bad=$((bad + 1))
  fi
done
printf '%s\n' "${times[@]}" | sort -n | awk -v np="$np" -v bad="$bad" '
  { t[NR] = $1 } END {
    printf "np=%d runs=%d failed_or_slow=%d wall min %.2f median %.2f max %.2f s\n",
           np, NR, bad, t[1], t[int((NR + 1) / 2)], t[NR] }'
[ "$bad" -eq 0 ]
