#!/usr/bin/env bash
# Usage: check_pip.sh SOURCE_DIR WORK PYTHON
# pip install . as a user would, offline: a copy of the source tree into a
# venv made from PYTHON with --system-site-packages (Debian's setuptools,
# wheel and numpy; --no-build-isolation --no-index: nothing downloaded).
# setup.py builds libhb with CMake (CUDA off here, for time); then the
# Python consumer runs with only the venv's site directory, and
# pip uninstall removes the package.
set -euo pipefail
src=$(realpath "$1") work=$2 python=${3:-}
if [ -z "$python" ]; then
  echo "pip consumer skipped: the python binding is not built"
  exit 0
fi
rm -rf "$work" && mkdir -p "$work/src" && work=$(realpath "$work")
tar -C "$src" --exclude='./_*' --exclude='./build' --exclude='./.git' --exclude='*.egg-info' -cf - . |
  tar -C "$work/src" -xf -
"$python" -m venv --system-site-packages "$work/venv"
py=$work/venv/bin/python
unset PYTHONPATH LD_LIBRARY_PATH HB_HBRUN
if ! HB_CMAKE_ARGS="-DHB_WITH_CUDA=OFF" "$py" -m pip install --no-build-isolation --no-index \
       "$work/src" > "$work/pip.log" 2>&1; then
  tail -40 "$work/pip.log"; exit 1
fi
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
ls "$site/hb"
(cd "$work" && "$py" -I "$src/tests/install/consumer/consumer.py" "$site" "$site")
"$py" -m pip uninstall -y hb > /dev/null
if [ -e "$site/hb" ]; then
  echo "pip uninstall left $site/hb:"; ls -la "$site/hb"; exit 1
fi
echo "install_pip: pip install . built, installed, ran and uninstalled hb"
