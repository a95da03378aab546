#!/usr/bin/env bash
# Usage: check_install.sh BUILD_DIR CONSUMER_SRC WORK_DIR
set -euo pipefail
build=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
libdir=$(ls -d "$prefix"/lib*/ | head -1); libdir=${libdir%/}
for f in "$prefix/include/hb.h" "$prefix/bin/hbrun" "$libdir/libhb.a" "$libdir/pkgconfig/hb.pc" \
         "$libdir/cmake/hb/hbConfig.cmake"; do
  [ -e "$f" ] || { echo "missing after install: $f"; exit 1; }
done
ls "$libdir"/libhb.so.* > /dev/null
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
echo "install_consumers: pkg-config and find_package consumers built and ran"
