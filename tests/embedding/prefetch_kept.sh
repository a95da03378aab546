#!/bin/sh
# The owners' row loops (Table::encode_rows, Table::step_rows and the
# optimizer loops instantiated for it) and Collection::prefetch_owned must
# keep their prefetches in the built library: GCC once took Shard::prefetch
# (nothing but __builtin_prefetch) for a function without effects and
# dropped every call to it, silently (docs/performance.md, "Realistic
# tables"). Counts prefetch instructions, or calls that remain to a
# Shard::prefetch* (an unoptimized build), in those functions.
# Usage: prefetch_kept.sh LIBHB. Exit 77 (skip) without objdump or off x86-64.
command -v objdump >/dev/null 2>&1 || exit 77
[ "$(uname -m)" = x86_64 ] || exit 77
objdump -d --no-show-raw-insn -C "$1" | awk '
  /^[0-9a-f]+ <.*>:$/ {
    f = 0
    if ($0 ~ /Table::encode_rows|Table::step_rows/) f = 1
    if ($0 ~ /Collection::prefetch_owned/) f = 2
    if (f) seen[f] = 1
  }
  f && (/\tprefetch/ || /call.*Shard::prefetch/) { n[f]++ }
  END {
    printf "owner loops: %d, prefetch_owned: %d (prefetches or calls)\n",
           n[1], n[2]
    # prefetch_owned may be inlined into its caller (no symbol): then only
    # the owner loops are checked.
    exit (n[1] > 0 && (!seen[2] || n[2] > 0)) ? 0 : 1
  }'
