#!/usr/bin/env bash
# Usage: check_install.sh PREFIX CONSUMER_SRC WORK_DIR
# Builds a small C consumer against an installed tree (PREFIX: the shared
# install of the install_* tests, or the unpacked .deb's usr) twice: with
# pkg-config and with find_package.
set -euo pipefail
prefix=$(realpath "$1") src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
libdir=$(ls -d "$prefix"/lib*/ | head -1); libdir=${libdir%/}
for f in "$prefix/include/hb.h" "$prefix/bin/hbrun" "$libdir/libhb.a" "$libdir/pkgconfig/hb.pc" \
         "$libdir/cmake/hb/hbConfig.cmake"; do
  [ -e "$f" ] || { echo "missing after install: $f"; exit 1; }
done
ls "$libdir"/libhb.so.* > /dev/null
unset LD_LIBRARY_PATH
export PKG_CONFIG_PATH=$libdir/pkgconfig
pkg-config --validate hb
echo "== pkg-config: $(pkg-config --cflags --libs hb)"
cp "$src/consumer.c" "$src/Makefile" "$work/"
make -s -C "$work" consumer
"$work/consumer"
echo "== find_package"
cmake -S "$src" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" > "$work/cmake.log"
cmake --build "$work/cmake-build" > "$work/cmake-build.log"
"$work/cmake-build/consumer"
for exe in "$work/consumer" "$work/cmake-build/consumer"; do
  lib=$(ldd "$exe" | awk '/libhb\.so/ {print $3}')
  case "$lib" in "$prefix"/*) ;; *) echo "$exe loads libhb from '$lib', not $prefix"; exit 1 ;; esac
done
echo "install_consumers: pkg-config and find_package consumers built and ran"
