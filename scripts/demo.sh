#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install what is needed, build
# what the demo runs (target `demo`: hbrun, ctr_train, libhb and the CUDA
# plugin if built; ./scripts/test.sh builds the rest), then train the CTR
# demo on 4 ranks through hbrun.
# Extra arguments go to ctr_train (e.g. --train-samples 100000).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B _build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython3_EXECUTABLE=/usr/bin/python3 > /dev/null
cmake --build _build -j"$(nproc)" --target demo
exec _build/src/launcher/hbrun -n "${HB_DEMO_RANKS:-4}" --timeout 1200 -- \
  _build/examples/ctr_train/ctr_train --out _build/ctr_out "$@"
