#!/bin/bash
# By hand (too long for CI): the splits case of ps_tests.sh -- dynamic
# splits through the public API (hb_ps_split_next / hb_ps_split_commit),
# worker 1 SIGKILLed after one of its push requests at a random step and
# restarted, every sample applied exactly once per epoch -- RUNS runs
# (default 20) at worlds 2-3 and 1-2 ps tasks, staleness K (default 0; the
# age bound with BOUND=age). Prints one line per case; exits 1 if any
# failed.
#   tests/ps/ps_splits_kill.sh BUILD_DIR [RUNS] [K]
set -u
B=$(cd "$1" && pwd) RUNS=${2:-20} K=${3:-0}
HERE=$(cd "$(dirname "$0")" && pwd)
export HB_STALENESS_BOUND=${BOUND:-steps}
bad=0
for W in 2 3; do
  for P in 1 2; do
    d=$B/tests/ps/work/splits_kill_w${W}_p${P}
    mkdir -p "$d"
    t0=$SECONDS
    if bash "$HERE/ps_tests.sh" "$B/src/launcher/hbrun" "$B/tests/ps/ps_train" \
      "$d" splits "$W" "$P" "$K" "$RUNS" >"$d.log" 2>&1; then
      echo "w$W p$P k$K ($HB_STALENESS_BOUND): $RUNS of $RUNS runs exactly once ($((SECONDS - t0)) s)"
    else
      echo "w$W p$P k$K ($HB_STALENESS_BOUND): FAILED: $(grep -m1 FAILED "$d.log") (log: $d.log)"
      bad=1
    fi
  done
done
exit $bad
