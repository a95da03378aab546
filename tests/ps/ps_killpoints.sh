#!/bin/bash
# By hand (too long for CI): the killpoint case of ps_tests.sh, RUNS runs
# (default 20) at every world 2-3 and 1-2 ps tasks, staleness K (default
# 0); each run kills worker 1 after one of its 2P per-step push requests
# in turn. MODE=splits: its splits case instead (dynamic splits through
# hb_ps_split_next / hb_ps_split_commit, worker 1 killed after one of its
# push requests at a random step; BOUND=age for the age bound, with K large
# enough that no push is scaled by 1/(1+age): the check counts the -1
# gradients in the rows, e.g. K 1000). Prints one line per case; exits 1
# if any failed.
#   [MODE=splits [BOUND=age]] tests/ps/ps_killpoints.sh BUILD_DIR [RUNS] [K]
set -u
B=$(cd "$1" && pwd) RUNS=${2:-20} K=${3:-0} MODE=${MODE:-killpoint}
export HB_STALENESS_BOUND=${BOUND:-steps}
HERE=$(cd "$(dirname "$0")" && pwd)
bad=0
for W in 2 3; do
  for P in 1 2; do
    d=$B/tests/ps/work/${MODE}_w${W}_p${P}
    mkdir -p "$(dirname "$d")"
    t0=$SECONDS
    if bash "$HERE/ps_tests.sh" "$B/src/launcher/hbrun" "$B/tests/ps/ps_train" \
      "$d" "$MODE" "$W" "$P" "$K" "$RUNS" >"$d.log" 2>&1; then
      echo "$MODE w$W p$P k$K ($HB_STALENESS_BOUND): $RUNS of $RUNS runs exactly once ($((SECONDS - t0)) s)"
    else
      echo "$MODE w$W p$P k$K ($HB_STALENESS_BOUND): FAILED: $(grep -m1 FAILED "$d.log") (log: $d.log)"
      bad=1
    fi
  done
done
exit $bad
