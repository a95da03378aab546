#!/bin/bash
# The campaign by hand: demo_kills.py's modes, RUNS runs each (default 20),
# against a build folder; `py` is mode worker with the numpy demo.
#   [MODES='worker ps join py'] tests/ps/demo_kills.sh [BUILD] [RUNS]
set -eu
BUILD=$(cd "${1:-_build}" && pwd) RUNS=${2:-20}
HERE=$(cd "$(dirname "$0")" && pwd)
for mode in ${MODES:-worker ps join py}; do
  args=("$mode")
  if [ "$mode" = py ]; then
    args=(worker --python "$HERE/../../examples/ctr_train_py/ctr_train.py")
    export PYTHONPATH=$BUILD/bindings/python PYTHONDONTWRITEBYTECODE=1
  fi
  /usr/bin/python3 "$HERE/demo_kills.py" "$BUILD/src/launcher/hbrun" \
    "$BUILD/examples/ctr_train/ctr_train" "${args[@]}" --runs "$RUNS"
done
