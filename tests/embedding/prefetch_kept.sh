#!/bin/sh
# The owners' row loops (Table::encode_rows, Table::step_rows and the
# optimizer loops instantiated for it) must keep their prefetches in the
# built library: GCC took Shard::prefetch (nothing but __builtin_prefetch)
# for a function without effects and dropped every call to it, silently
# (docs/performance.md, "Realistic tables"). Counts prefetch instructions,
# or calls that remain to a Shard::prefetch* (an unoptimized build), in
# those functions.
# Usage: prefetch_kept.sh LIBHB. Exit 77 (skip) without objdump or off x86-64.
command -v objdump >/dev/null 2>&1 || exit 77
[ "$(uname -m)" = x86_64 ] || exit 77
objdump -d --no-show-raw-insn -C "$1" | awk '
  /^[0-9a-f]+ <.*>:$/ { f = $0 ~ /Table::encode_rows|Table::step_rows/ }
  f && (/\tprefetch/ || /call.*Shard::prefetch/) { n++ }
  END {
    printf "owner loops: %d prefetches (or calls to Shard::prefetch)\n", n
    exit n > 0 ? 0 : 1
  }'
