#!/usr/bin/env bash
# Instructions per training step of the C++ and the Python CTR demo at 1
# rank, and per 512-sample batch of their data generators, counted by
# valgrind --tool=callgrind: a signal that does not move with the other
# tenants of a shared machine (cpu_per_step.sh's CPU seconds do, by +-15 %).
# Each demo runs twice, with SMALL and with LARGE train samples; the
# difference of the two counts over the difference of their steps is the
# cost of a step (start-up, evaluation and export cancel out). The Python
# demo's step includes its generator (on the prefetch thread), the C++
# demo's its own (with the native helper where it is built: the demo's
# --generator auto); the generators' lines say how much of each step they are.
# Run from the repository root:
#   bench/ctr_py/instr_per_step.sh BUILD_DIR
# Environment: SMALL=5120, LARGE=15360 (train samples; 512 per step),
# PY_DIR=DIR (the Python demo's folder, default examples/ctr_train_py; e.g.
# another branch's copy to compare). Needs valgrind; takes a few minutes
# (the demos run ~50x slower under callgrind).
set -u
B=$(cd "$1" && pwd); HB_SRC=$(pwd); S=${SMALL:-5120}; L=${LARGE:-15360}
PY_DIR=$(cd "${PY_DIR:-$HB_SRC/examples/ctr_train_py}" && pwd)
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
common="--vocab 2048 --eval-samples 512 --eval-every 1000000 --max-gap 1 --log-every 1000"
# count OUT CMD...: runs CMD under callgrind, prints its instruction count.
count() {
  local out=$1; shift
  valgrind --tool=callgrind --callgrind-out-file="$W/$out" "$@" > "$W/log" 2>&1 ||
    { echo "instr_per_step.sh: failed: $*" >&2; tail -5 "$W/log" >&2; exit 1; }
  sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$W/log"
}
# per_unit NAME UNITS_SMALL UNITS_LARGE COUNT_SMALL COUNT_LARGE
per_unit() {
  [ -n "$4" ] && [ -n "$5" ] || { echo "instr_per_step.sh: no count for $1" >&2; exit 1; }
  awk -v n="$1" -v a="$2" -v b="$3" -v c="$4" -v d="$5" \
    'BEGIN { printf "RESULT %s instructions=%.3fM\n", n, (d - c) / (b - a) / 1e6 }'
}
steps_s=$((S / 512)) steps_l=$((L / 512))
c1=$(count cs "$B/examples/ctr_train/ctr_train" $common --train-samples "$S" --out "$W/o")
c2=$(count cl "$B/examples/ctr_train/ctr_train" $common --train-samples "$L" --out "$W/o")
per_unit "cpp_step" $steps_s $steps_l "$c1" "$c2"
p1=$(cd "$PY_DIR" && PYTHONPATH="$B/bindings/python" count ps /usr/bin/python3 ctr_train.py $common \
     --train-samples "$S" --out "$W/o")
p2=$(cd "$PY_DIR" && PYTHONPATH="$B/bindings/python" count pl /usr/bin/python3 ctr_train.py $common \
     --train-samples "$L" --out "$W/o")
per_unit "py_step" $steps_s $steps_l "$p1" "$p2"
# The generators alone: 0 and 20 batches of 512 samples.
cat > "$W/gen.cc" <<'EOF'
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "synth_data.h"
int main(int argc, char **argv) {
  const int n = atoi(argv[1]);
  synth::Generator g(2026, 2048, 1.1);
  std::vector<synth::Sample> s(512);
  double sum = 0;
  for (int b = 0; b < n; ++b) {
    for (int i = 0; i < 512; ++i) g.sample(0, int64_t{b} * 512 + i, &s[i]);
    sum += s[0].dense[0];
  }
  printf("%g\n", sum);
}
EOF
# The demo's flags (CMakeLists.txt: -O3 for RelWithDebInfo).
g++ -O3 -g -I"$HB_SRC/examples/ctr_train" "$W/gen.cc" -o "$W/gen"
g1=$(count g0 "$W/gen" 0); g2=$(count g20 "$W/gen" 20)
per_unit "cpp_generator_batch" 0 20 "$g1" "$g2"
cat > "$W/gen.py" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
import synth_data
native = None
if sys.argv[3] == "native":  # the demo's native helper, on the Python path
    native = synth_data.load_native()
    assert native is not None, synth_data.NATIVE_LIB + " not found"
g = synth_data.Generator(2026, 2048, native=native) if native else synth_data.Generator(2026, 2048)
for b in range(int(sys.argv[2])):
    g.sample(0, b * 512, (b + 1) * 512)
EOF
q1=$(count q0 /usr/bin/python3 "$W/gen.py" "$PY_DIR" 0 numpy)
q2=$(count q20 /usr/bin/python3 "$W/gen.py" "$PY_DIR" 20 numpy)
per_unit "py_generator_batch" 0 20 "$q1" "$q2"
# With the native helper (synth_native.cc), where PY_DIR's synth_data has it.
if grep -q "def load_native" "$PY_DIR/synth_data.py"; then
  q1=$(PYTHONPATH="$B/bindings/python" count n0 /usr/bin/python3 "$W/gen.py" "$PY_DIR" 0 native)
  q2=$(PYTHONPATH="$B/bindings/python" count n20 /usr/bin/python3 "$W/gen.py" "$PY_DIR" 20 native)
  per_unit "py_native_generator_batch" 0 20 "$q1" "$q2"
fi
