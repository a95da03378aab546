#!/bin/bash
# By hand (too long for CI): the killpoint case of ps_tests.sh, RUNS runs
# (default 20) at every world 2-3 and 1-2 ps tasks, staleness K (default
# 0); each run kills worker 1 after one of its 2P per-step push requests
# in turn. Prints one line per case; exits 1 if any failed.
#   tests/ps/ps_killpoints.sh BUILD_DIR [RUNS] [K]
set -u
B=$(cd "$1" && pwd) RUNS=${2:-20} K=${3:-0}
HERE=$(cd "$(dirname "$0")" && pwd)
bad=0
for W in 2 3; do
  for P in 1 2; do
    d=$B/tests/ps/work/killpoints_w${W}_p${P}
    t0=$SECONDS
    if bash "$HERE/ps_tests.sh" "$B/src/launcher/hbrun" "$B/tests/ps/ps_train" \
      "$d" killpoint "$W" "$P" "$K" "$RUNS" >"$d.log" 2>&1; then
      echo "w$W p$P k$K: $RUNS of $RUNS runs exactly once ($((SECONDS - t0)) s)"
    else
      echo "w$W p$P k$K: FAILED: $(grep -m1 FAILED "$d.log") (log: $d.log)"
      bad=1
    fi
  done
done
exit $bad
