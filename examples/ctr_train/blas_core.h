// Which kernels OpenBLAS runs the MLP's GEMMs with, and a correction when it
// guessed wrong.
//
// OpenBLAS as Debian ships it (DYNAMIC_ARCH) picks its kernels when it loads,
// by the CPU's model number. A model it does not know yet gets its oldest x86
// kernels: 0.3.21 (Debian 12) on an Intel family 6 model 207 runs "Prescott"
// (SSE3) kernels on a CPU with AVX-512, and the demo's MLP takes 2.6x as long
// (docs/performance.md). The choice cannot be changed once the library has
// loaded, so when OpenBLAS reports a pre-AVX core on a CPU with AVX2 and FMA,
// and the user has not chosen one (OPENBLAS_CORETYPE unset), the program runs
// itself again with OPENBLAS_CORETYPE naming the kernels the CPU's features
// support. Nothing else changes: same pid, arguments and environment.
#pragma once

#include <cstdlib>
#include <cstring>

#ifdef HB_CTR_CBLAS
#include <dlfcn.h>
#include <unistd.h>
#endif

namespace blas_core {

// The core OpenBLAS chose ("SkylakeX", "Haswell", ...), or nullptr when the
// BLAS is not OpenBLAS (or the demo runs the loops).
inline const char *openblas_core() {
#ifdef HB_CTR_CBLAS
  using CoreName = char *(*)();
  auto fn =
      reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  return fn ? fn() : nullptr;
#else
  return nullptr;
#endif
}

// OpenBLAS's names of the x86 cores whose kernels predate AVX.
inline bool pre_avx(const char *core) {
  static const char *const kOld[] = {
      "Unknown", "Katmai",  "Coppermine",    "Northwood",  "Prescott",
      "Banias",  "Core2",   "Penryn",        "Dunnington", "Nehalem",
      "Atom",    "Opteron", "Opteron(SSE3)", "Barcelona",  "Nano"};
  for (const char *old : kOld)
    if (std::strcmp(core, old) == 0) return true;
  return false;
}

// The OpenBLAS core whose kernels this CPU's features run, or nullptr when
// they predate AVX2.
inline const char *core_for_features() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512cd"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return "Haswell";
#endif
  return nullptr;
}

// The core OpenBLAS should run when it runs pre-AVX kernels on a CPU with
// AVX2 and FMA (whoever chose them), else nullptr.
inline const char *better_core() {
  const char *core = openblas_core();
  return core && pre_avx(core) ? core_for_features() : nullptr;
}

// Call first in main: returns only when no correction is needed (or the
// re-run failed, which leaves the slow kernels working).
inline void rerun_if_misdetected(char **argv) {
#ifdef HB_CTR_CBLAS
  if (std::getenv("OPENBLAS_CORETYPE")) return;  // the user's choice
  const char *want = better_core();
  if (!want) return;
  // The program's path, not "/proc/self/exe" itself: under valgrind that
  // names the tool, while readlink is answered with the program's.
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return;
  self[n] = '\0';
  setenv("OPENBLAS_CORETYPE", want, 1);
  execv(self, argv);
  unsetenv("OPENBLAS_CORETYPE");
#else
  (void)argv;
#endif
}

}  // namespace blas_core
