#!/usr/bin/env bash
# Usage: check_consumer.sh LANG PREFIX WORK SRC ARGS...
# Builds and runs a foreign program that uses hb through LANG's binding as
# installed under PREFIX, with nothing of the build tree in its environment:
#   python PREFIX WORK SRC PYTHON SITE   SITE: site directory under PREFIX
#   java   PREFIX WORK SRC JAVAC JAVA LIBDIR   (hb.jar in share/java)
#   go     PREFIX WORK SRC GO MODDIR LIBDIR    MODDIR: the Go module under PREFIX
# An empty tool argument means the binding was not built: the test skips.
set -euo pipefail
lang=$1 prefix=$(realpath "$2") work=$3 src=$(realpath "$4"); shift 4
if [ -z "${1:-}" ]; then
  echo "$lang consumer skipped: the $lang binding is not built"
  exit 0
fi
rm -rf "$work" && mkdir -p "$work" && work=$(realpath "$work")
# Only the installed tree: no search path into the build tree.
unset PYTHONPATH LD_LIBRARY_PATH HB_HBRUN CLASSPATH CGO_CFLAGS CGO_LDFLAGS GOFLAGS PKG_CONFIG_PATH
export PYTHONDONTWRITEBYTECODE=1 PYTHONNOUSERSITE=1

case $lang in
python)
  python=$1 site=$prefix/$2
  # -I: no PYTHONPATH, user site or script folder; only the site directory
  # of the install is added.
  (cd "$work" && "$python" -I "$src/consumer.py" "$site" "$prefix")
  ;;
java)
  javac=$1 java=$2 libdir=$prefix/$3 jar=$prefix/share/java/hb.jar
  "$javac" -Xlint:all -Werror -d "$work" -cp "$jar" "$src/Consumer.java"
  "$java" -Xcheck:jni -cp "$jar:$work" -Djava.library.path="$libdir" Consumer "$prefix"
  ;;
go)
  go=$1 moddir=$prefix/$2 libdir=$prefix/$3
  cp "$src/go/main.go" "$work/"
  # The lines a user writes (README): a require and a replace naming the
  # installed module; nothing is downloaded (GOPROXY=off).
  cat > "$work/go.mod" <<MOD
module example.com/consumer

go 1.19

require hb.dev/hb v0.0.0
replace hb.dev/hb => $moddir
MOD
  (cd "$work" && env GOPROXY=off GOPATH="$work/gopath" GOCACHE="$work/gocache" \
     PKG_CONFIG_PATH="$libdir/pkgconfig" "$go" build -o consumer .)
  lib=$(ldd "$work/consumer" | awk '/libhb\.so/ {print $3}')
  case "$lib" in "$prefix"/*) ;; *) echo "go consumer loads libhb from '$lib', not $prefix"; exit 1 ;; esac
  "$work/consumer"
  ;;
*) echo "unknown language $lang"; exit 2 ;;
esac
