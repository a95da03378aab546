#!/usr/bin/env bash
# Checks the shape of libhb.so: only hb_* symbols exported, SONAME carries
# the major version, and no load-time dependency on CUDA or NCCL.
set -euo pipefail
lib=$1
fail=0
bad=$(nm -D --defined-only "$lib" | awk '$2 ~ /[TDBRVW]/ {print $3}' | grep -v '^hb_' || true)
if [ -n "$bad" ]; then echo "exported non-hb symbols:"; echo "$bad" | head -20; fail=1; fi
n=$(nm -D --defined-only "$lib" | awk '$3 ~ /^hb_/' | wc -l)
[ "$n" -gt 20 ] || { echo "only $n hb_* symbols exported"; fail=1; }
soname=$(readelf -d "$lib" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[[ "$soname" =~ ^libhb\.so\.[0-9]+$ ]] || { echo "bad SONAME '$soname'"; fail=1; }
if readelf -d "$lib" | grep NEEDED | grep -Ei 'cuda|nccl|cublas'; then
  echo "libhb.so must not depend on CUDA/NCCL at load time"; fail=1
fi
[ $fail = 0 ] && echo "abi_exports: $n hb_* symbols, SONAME $soname, no CUDA deps"
exit $fail
