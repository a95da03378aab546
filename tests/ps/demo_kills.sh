#!/bin/bash
# The campaign by hand: demo_kills.py's modes, RUNS runs each (default 20),
# against a build folder.
#   [MODES='worker ps join'] tests/ps/demo_kills.sh [BUILD] [RUNS]
set -eu
BUILD=${1:-_build} RUNS=${2:-20}
HERE=$(cd "$(dirname "$0")" && pwd)
for mode in ${MODES:-worker ps join}; do
  /usr/bin/python3 "$HERE/demo_kills.py" "$BUILD/src/launcher/hbrun" \
    "$BUILD/examples/ctr_train/ctr_train" "$mode" --runs "$RUNS"
done
