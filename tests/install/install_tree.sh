#!/usr/bin/env bash
# Usage: install_tree.sh BUILD_DIR SOURCE_DIR PREFIX
# The shared install of the install_* tests (fixture hb_install): installs
# the build into PREFIX, then checks that nothing installed points back
# into the build or source tree (no RUNPATH, no path in a text file).
set -euo pipefail
build=$(realpath "$1") src=$(realpath "$2") prefix=$3
rm -rf "$prefix"
mkdir -p "$(dirname "$prefix")"
cmake --install "$build" --prefix "$prefix" > "$prefix.log"
"$(dirname "$0")/check_relocatable.sh" "$prefix" "$build" "$src"
echo "install_tree: installed into $prefix"
