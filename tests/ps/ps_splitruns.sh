#!/bin/bash
# By hand (too long for CI): the splitlost and splitckpt cases of
# ps_tests.sh, RUNS runs (default 20) each at worlds 2-3 and 1-2 ps tasks:
# a worker lost for good mid-split (its split finished by another), and a
# ps task SIGKILLed under job checkpoints (tables and queue resumed). Prints
# one line per case; exits 1 if any failed.
#   tests/ps/ps_splitruns.sh BUILD_DIR [RUNS]
set -u
B=$(cd "$1" && pwd) RUNS=${2:-20}
HERE=$(cd "$(dirname "$0")" && pwd)
bad=0
for mode in splitlost splitckpt; do
  for W in 2 3; do
    for P in 1 2; do
      d=$B/tests/ps/work/${mode}_runs_w${W}_p${P}
      args=("$W" "$P" "$RUNS")
      [ $mode = splitlost ] && args=("$W" "$P" 0 "$RUNS")
      t0=$SECONDS
      if bash "$HERE/ps_tests.sh" "$B/src/launcher/hbrun" \
        "$B/tests/ps/ps_train" "$d" $mode "${args[@]}" >"$d.log" 2>&1; then
        echo "$mode w$W p$P: $RUNS of $RUNS runs exactly once ($((SECONDS - t0)) s)"
      else
        echo "$mode w$W p$P: FAILED: $(grep -m1 FAILED "$d.log") (log: $d.log)"
        bad=1
      fi
    done
  done
done
exit $bad
