#!/usr/bin/env bash
# Runs every test of hb on a fresh Debian 12 machine: installs what it needs,
# builds, then runs
#   1. the whole suite (C/C++ unit and multi-process tests, install/consumer
#      tests, Python/Java/Go bindings, docs);
#   2. the C/C++ tests again under ASan+UBSan;
#   3. the threaded parts (label tsan) under TSan;
#   4. the TF_CONFIG fuzzer for a short while (clang, libFuzzer).
# Build trees: _build, _build-asan, _build-tsan, _build-fuzz (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
jobs=${JOBS:-$(nproc)}
ctest_jobs=${CTEST_JOBS:-2}
common=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython3_EXECUTABLE=/usr/bin/python3)
step() { printf '\n==== %s ====\n' "$*"; }

step "build + full suite"
cmake -S . -B _build "${common[@]}" > /dev/null
cmake --build _build -j"$jobs"
(cd _build && ctest --output-on-failure -j"$ctest_jobs" -LE 'fuzz|tsan_only')

# Sanitizer builds skip what the sanitizers cannot see into (CUDA plugin,
# JVM/Go/Python hosts) and the benchmarks.
san=(-DHB_WITH_CUDA=OFF -DHB_BUILD_BINDINGS=OFF -DHB_BUILD_BENCH=OFF)
step "ASan+UBSan"
cmake -S . -B _build-asan "${common[@]}" "${san[@]}" -DHB_SANITIZE=address,undefined > /dev/null
cmake --build _build-asan -j"$jobs"
(cd _build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
   ctest --output-on-failure -j"$ctest_jobs" -LE 'fuzz|install')

step "TSan (threaded parts)"
cmake -S . -B _build-tsan "${common[@]}" "${san[@]}" -DHB_BUILD_EXAMPLES=OFF -DHB_SANITIZE=thread > /dev/null
cmake --build _build-tsan -j"$jobs"
(cd _build-tsan && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure -j"$ctest_jobs" -L tsan)

step "fuzz (TF_CONFIG parser)"
CC=clang CXX=clang++ cmake -S . -B _build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo "${san[@]}" \
  -DHB_BUILD_EXAMPLES=OFF -DHB_FUZZ=ON > /dev/null
cmake --build _build-fuzz -j"$jobs"
(cd _build-fuzz && ctest --output-on-failure -L fuzz)

step "all test stages passed"
