#!/usr/bin/env bash
# Usage: make_deb.sh BUILD_DIR SOURCE_DIR WORK
# The Debian package of the install_deb_* tests (fixture hb_deb): cpack -G DEB
# into WORK, its control fields checked, unpacked into WORK/root with
# dpkg-deb -x (a scratch root: nothing is installed on this machine).
set -euo pipefail
build=$(realpath "$1") src=$(realpath "$2") work=$3
rm -rf "$work" && mkdir -p "$work" && work=$(realpath "$work")
if ! (cd "$build" && cpack -G DEB -B "$work/out") > "$work/cpack.log" 2>&1; then
  tail -40 "$work/cpack.log"; exit 1
fi
deb=$(ls "$work"/out/*.deb)
dpkg-deb --info "$deb"
depends=$(dpkg-deb --field "$deb" Depends)
for dep in libuv1 libcjson1 libgloo libuv1-dev libcjson-dev python3-numpy; do
  case ", $depends" in *", $dep"*) ;; *) echo "Depends lacks $dep: $depends"; exit 1 ;; esac
done
dpkg-deb -x "$deb" "$work/root"
for f in usr/include/hb.h usr/bin/hbrun usr/lib/libhb.so.0 usr/share/java/hb.jar usr/lib/libhb_jni.so \
         usr/share/doc/hb/README.md; do
  [ -e "$work/root/$f" ] || { echo "missing from the package: $f"; exit 1; }
done
"$(dirname "$0")/check_relocatable.sh" "$work/root" "$build" "$src"
echo "install_deb: $(basename "$deb") unpacked into $work/root"
