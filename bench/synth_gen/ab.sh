#!/usr/bin/env bash
# Interleaved A/B of two hb_synth_gen builds: per VOCAB, REPEATS rounds of
# A then B, each run alone (1 copy) and as 2 copies at once (the 2 ranks of
# a job: one core each, one shared L3; the second copy starts at sample
# SAMPLES, as rank 1 would). Prints the median CPU ns per sample (the
# thread's CPU time: robust to other tasks' slices) of each and
# B/A, and fails if the digests differ.
#   bench/synth_gen/ab.sh OLD_BIN NEW_BIN
# Environment: VOCABS="2048 131072", SAMPLES=200000, REPEATS=3.
set -u
A=$1; B=$2; S=${SAMPLES:-200000}; R=${REPEATS:-3}
med() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
ns() { sed -n 's/.*cpu_ns_per_sample \([0-9.]*\).*/\1/p'; }
dig() { sed -n 's/.*digest \([0-9a-f]*\).*/\1/p'; }
for v in ${VOCABS:-2048 131072}; do
  for copies in 1 2; do
    : > /tmp/synth_ab.$$.a; : > /tmp/synth_ab.$$.b
    for rep in $(seq 1 "$R"); do
      for side in a b; do
        bin=$A; [ $side = b ] && bin=$B
        if [ "$copies" = 1 ]; then
          out=$("$bin" "$v" "$S")
        else
          "$bin" "$v" "$S" "$S" > /tmp/synth_ab.$$.other & pid=$!
          out=$("$bin" "$v" "$S"); wait $pid
          out="$out
$(cat /tmp/synth_ab.$$.other)"
        fi
        echo "$out" | ns >> /tmp/synth_ab.$$.$side
        echo "$out" | dig >> /tmp/synth_ab.$$.dig$side
      done
    done
    a=$(med < /tmp/synth_ab.$$.a); b=$(med < /tmp/synth_ab.$$.b)
    echo "vocab $v copies $copies: A $a ns/sample, B $b ns/sample, B/A $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", b / a }')"
  done
  if ! cmp -s <(sort -u /tmp/synth_ab.$$.diga) <(sort -u /tmp/synth_ab.$$.digb); then
    echo "vocab $v: DIGESTS DIFFER" >&2; rm -f /tmp/synth_ab.$$.*; exit 1
  fi
  rm -f /tmp/synth_ab.$$.dig*
done
rm -f /tmp/synth_ab.$$.*
