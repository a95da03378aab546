#!/usr/bin/env bash
# Usage: check_relocatable.sh ROOT BUILD_DIR SOURCE_DIR
# Fails when an installed ELF file's RPATH/RUNPATH or an installed text file
# names the build or source tree (the install would work only beside them).
set -euo pipefail
root=$1 build=$2 src=$3
bad=0
while IFS= read -r -d '' f; do
  if head -c 4 "$f" | grep -q $'^\x7fELF'; then
    rpath=$(readelf -d "$f" | sed -n 's/.*(R\(UN\)\{0,1\}PATH).*\[\(.*\)\]/\2/p')
    case "$rpath" in *"$build"*|*"$src"*) echo "RUNPATH into the build tree: $f: $rpath"; bad=1 ;; esac
  elif grep -Iq . "$f" && grep -qF -e "$build" -e "$src" "$f"; then
    echo "installed file names the build or source tree: $f"; grep -nF -e "$build" -e "$src" "$f" | head -3
    bad=1
  fi
done < <(find "$root" -type f -print0)
exit $bad
