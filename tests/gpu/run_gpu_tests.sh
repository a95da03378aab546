#!/usr/bin/env bash
# Builds and runs hb's GPU tests on a machine with a GPU.
#
#   tests/gpu/run_gpu_tests.sh [build-dir]
#
# With the project's dependencies (libuv, cJSON, Gloo, GoogleTest, NCCL in
# the CUDA toolkit) it configures the normal CMake build and runs every test
# labelled `gpu` (kernels and NCCL at world size 1, the public API against
# the shared libhb.so, and with two or more GPUs the multi-rank NCCL
# collectives and peer-loss tests under hbrun). On a bare GPU image without
# them it falls back to a standalone build: the plugin with nvcc, the
# kernel, collective and plugin tests against the few core files they need
# and a GoogleTest stand-in (NCCL from the toolkit or from pip's
# nvidia-nccl package). Exit status: 0 when every test passed or skipped.
# HB_GPU_STANDALONE=1 forces the standalone build, HB_GPU_MINI_GTEST=1 the
# GoogleTest stand-in (to check them on a machine that has everything).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-$root/build-gpu}
jobs=$(nproc 2>/dev/null || echo 4)

echo "== GPUs"
if command -v nvidia-smi >/dev/null; then nvidia-smi -L || true; else echo "no nvidia-smi"; fi
ngpu=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU' || true)

cmake_build() {
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHB_BUILD_BINDINGS=OFF \
    -DHB_BUILD_BENCH=OFF -DHB_BUILD_EXAMPLES=OFF >"$build.cmake.log" 2>&1 || return 1
  grep -q '^HB_NCCL_LIBRARY:FILEPATH=/' "$build/CMakeCache.txt" || return 1
  cmake --build "$build" -j"$jobs" --target hb hb_cuda hbrun gpu_test gpu_device_test \
    gpu_api_test gpu_embedding_test gpu_collection_test gpu_mp_collectives
}

run_cmake_tests() {
  (cd "$build" && ctest -L gpu --output-on-failure)
  if [ "$ngpu" -ge 2 ]; then
    # GPU mode of hbrun: one worker per GPU, each seeing only its own.
    local hbrun="$build/src/launcher/hbrun" prog="$build/tests/gpu/gpu_mp_collectives"
    HB_CUDA_PLUGIN="$build/src/libhb_cuda.so" CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((ngpu - 1))) \
      "$hbrun" --timeout 300 -- "$prog"
  fi
}

# ---- standalone fallback --------------------------------------------------
find_nccl() {
  local cuda_home inc lib
  cuda_home=$(dirname "$(dirname "$(command -v nvcc)")")
  if [ -f "$cuda_home/include/nccl.h" ]; then
    nccl_inc=$cuda_home/include
    nccl_lib=$(ls "$cuda_home"/lib64/libnccl.so* "$cuda_home"/lib/libnccl.so* 2>/dev/null | head -1)
  fi
  if [ -z "${nccl_lib:-}" ]; then
    local py
    for py in python3 /usr/bin/python3; do
      inc=$($py -c 'import nvidia.nccl as m, os; print(list(m.__path__)[0])' 2>/dev/null) || continue
      nccl_inc=$inc/include
      nccl_lib=$(ls "$inc"/lib/libnccl.so* 2>/dev/null | head -1)
      break
    done
  fi
  [ -n "${nccl_lib:-}" ] && [ -f "$nccl_inc/nccl.h" ]
}

standalone_build() {
  command -v nvcc >/dev/null || { echo "no nvcc: cannot build the CUDA plugin"; return 1; }
  find_nccl || { echo "no NCCL (nccl.h + libnccl.so) in the CUDA toolkit or pip's nvidia-nccl"; return 1; }
  echo "== standalone build in $build (NCCL: $nccl_lib)"
  mkdir -p "$build/src"
  local arch="-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90"
  local inc="-I$root/include -I$root/src -I$root/cuda -I$nccl_inc"
  local libdir; libdir=$(dirname "$nccl_lib")
  # shellcheck disable=SC2086
  nvcc -std=c++17 -O3 -fmad=false $arch -shared -Xcompiler -fPIC,-fvisibility=hidden $inc \
    "$root"/cuda/*.cu -o "$build/src/libhb_cuda.so" -L"$libdir" -l:"$(basename "$nccl_lib")" \
    -Xlinker -rpath,"$libdir" -lcudart
  local core=(abi/error.cc abi/dtype.cc abi/status.cc gpu/build_info.cc common/log.cc
              common/health.cc gpu/loader.cc gpu/context_state.cc embedding/init.cc)
  local srcs=() f
  for f in "${core[@]}"; do srcs+=("$root/src/$f"); done
  local gtest_inc="" gtest_main="" gtest_lib=""
  if [ -z "${HB_GPU_MINI_GTEST:-}" ] &&
    echo '#include <gtest/gtest.h>' | g++ -std=c++17 -x c++ -fsyntax-only - 2>/dev/null; then
    gtest_lib="-lgtest -lgtest_main"
  else
    echo "(no GoogleTest: using the stand-in in tests/gpu/standalone)"
    gtest_inc="-I$root/tests/gpu/standalone"
    gtest_main="$root/tests/gpu/standalone/mini_main.cc"
  fi
  local defs="-DHB_HAVE_CUDA_PLUGIN -DHB_BUILD_TYPE=\"standalone\" -DHB_TEST_CUDA_PLUGIN_PATH=\"$build/src/libhb_cuda.so\""
  local t
  for t in "gpu_test:gpu_test.cc" "gpu_device_test:gpu_device_test.cc gpu_collectives_test.cc"; do
    local name=${t%%:*} files=() x
    for x in ${t#*:}; do files+=("$root/tests/gpu/$x"); done
    # shellcheck disable=SC2086
    g++ -std=c++17 -O2 -ffp-contract=off -pthread $defs $gtest_inc -I"$root/tests" $inc \
      "${files[@]}" "${srcs[@]}" $gtest_main -o "$build/$name" $gtest_lib -ldl
  done
}

run_standalone_tests() {
  export HB_CUDA_PLUGIN="$build/src/libhb_cuda.so"
  "$build/gpu_test"
  "$build/gpu_device_test"
}

if [ -z "${HB_GPU_STANDALONE:-}" ] && cmake_build; then
  run_cmake_tests
else
  echo "== the CMake build is not possible here (see $build.cmake.log); standalone build"
  standalone_build
  run_standalone_tests
fi
echo "== GPU tests done"
