#!/usr/bin/env bash
# Runs every test of hb on a fresh Debian 12 machine: installs what it needs,
# builds, then runs
#   1. the whole suite (C/C++ unit and multi-process tests, install/consumer
#      tests, Python/Java/Go bindings, docs);
#   2. the C/C++ tests again under ASan+UBSan;
#   3. the threaded parts (label tsan) under TSan;
#   4. the fuzzers (TF_CONFIG parser, reader line parser) for a short while
#      (clang, libFuzzer).
# Build trees: _build, _build-asan, _build-tsan, _build-fuzz (git-ignored).
# Budget: cold on a fresh 2-core machine, under 40 minutes in all, each test
# within half its timeout (tests/CMakeLists.txt, docs/testing.md); each
# stage prints its wall time.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
jobs=${JOBS:-$(nproc)}
ctest_jobs=${CTEST_JOBS:-2}
common=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython3_EXECUTABLE=/usr/bin/python3)
stage_start=$SECONDS
step() {
  if [ -n "${stage:-}" ]; then
    printf '==== %s: %d s ====\n' "$stage" $((SECONDS - stage_start))
  fi
  stage="$*"
  stage_start=$SECONDS
  printf '\n==== %s ====\n' "$*"
}

step "build + full suite"
cmake -S . -B _build "${common[@]}" > /dev/null
cmake --build _build -j"$jobs"
(cd _build && ctest --output-on-failure -j"$ctest_jobs" -LE fuzz)

# Sanitizer builds skip what the sanitizers cannot see into (CUDA plugin,
# JVM/Go/Python hosts), the benchmarks and the docs.
# They compile at -O1 with line tables only (-g1: stack traces keep file
# and line): at the default -O3 -g the ASan build alone took 20 minutes of
# the budget on 2 cores; -O1 halves a test file's compile and the
# sanitizers see the same code paths.
san=(-DHB_WITH_CUDA=OFF -DHB_BUILD_BINDINGS=OFF -DHB_BUILD_BENCH=OFF -DHB_BUILD_DOCS=OFF
     "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
     "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG")
step "ASan+UBSan"
cmake -S . -B _build-asan "${common[@]}" "${san[@]}" -DHB_SANITIZE=address,undefined > /dev/null
cmake --build _build-asan -j"$jobs"
(cd _build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
   ctest --output-on-failure -j"$ctest_jobs" -LE 'fuzz|install')

# The threaded parts, as TSan needs to see them: Health's callbacks and
# unsubscribes across threads, the rendezvous store and
# its client/server and liveness threads, contexts, concurrent serving
# lookups and the embedding API, the reader's parser threads, and the
# collectives with ranks as threads. TSan finds races between threads, so
# each threaded path runs once, not every sweep the other stages run
# (the binaries' TSAN groups, next to the tests):
#  - comm_test: every path (default, pieces, one round, Gloo's
#    halving-doubling) over every transport (TCP pair threads, shared-memory
#    rings, call board and staged board, both mixed) at 2 ranks (rings) and
#    3 ranks (staged board, odd worlds), through allgatherv, alltoallv,
#    broadcast, repeated large allreduces and the rank-order overlaps. Not
#    the dtype x op sweeps (the kernels are each rank's own loops: same
#    threads and bytes for every dtype), 4 ranks (no path 3 ranks lacks), 1
#    rank (no peers), nor the staged board's large-reduction sweep but once.
#    Fusion, mismatch, validation, segments and TCP pairs run whole.
#    Failure.* needs Gloo to hand an exception across its own threads,
#    which TSan cannot see through (tests/tsan.supp), and the Gloo
#    algorithms are Gloo's own (uninstrumented) code: both run in the
#    stages above.
#  - serving: concurrent lookups while versions are swapped and deltas
#    applied (serving_*_test).
#  - ps_unit_test: a ps server thread with its workers' connections.
#  - reader_test: not the exactly-once sweep over worlds x chunk sizes
#    (sharding arithmetic; the parser threads and bounded queues run in the
#    other tests with 1 to 4 threads); under TSan it alone took minutes.
step "TSan (threaded parts)"
tsan_tests=(common_health_test rendezvous_store_test rendezvous_client_server_test
            rendezvous_liveness_test context_test serving_export_test serving_swap_test serving_api_test
            serving_delta_test embedding_api_test reader_test recovery_test ps_unit_test
            comm_test)
cmake -S . -B _build-tsan "${common[@]}" "${san[@]}" -DHB_BUILD_EXAMPLES=OFF \
  -DHB_SANITIZE=thread > /dev/null
cmake --build _build-tsan -j"$jobs" --target "${tsan_tests[@]}"
export TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/tests/tsan.supp"
pick() { local IFS='|'; echo "^($*)(\..+)?\$"; }  # a binary's entries: name or name.group
(cd _build-tsan && ctest --output-on-failure -j"$ctest_jobs" -R "$(pick "${tsan_tests[@]}")")
unset TSAN_OPTIONS

step "fuzz (TF_CONFIG parser 30 s, reader line parser 20 s)"
CC=clang CXX=clang++ cmake -S . -B _build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo "${san[@]}" \
  -DHB_BUILD_EXAMPLES=OFF -DHB_FUZZ=ON > /dev/null
cmake --build _build-fuzz -j"$jobs" --target tf_config_fuzz reader_line_fuzz
(cd _build-fuzz && ctest --output-on-failure -L fuzz)

step "all test stages passed"
