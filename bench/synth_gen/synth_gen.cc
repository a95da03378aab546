// hb_synth_gen: the CTR demos' generator (examples/ctr_train/synth_data.h)
// alone, as ns per sample, and a digest of the samples so two builds can be
// checked byte-identical. Samples are generated in batches of BATCH at
// consecutive indices, as the demo's train split is (rank r of n starts at
// r * N / n, so run one copy per core to see the shared L3):
//
//   hb_synth_gen VOCAB SAMPLES [BEGIN] [BATCH]
//
// Prints "setup_ms S gen_ns_per_sample G cpu_ns_per_sample C digest D"
// (G wall, C the thread's CPU time). Under valgrind
// (--tool=cachegrind --cache-sim=yes) use a small SAMPLES.
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "synth_data.h"

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: hb_synth_gen VOCAB SAMPLES [BEGIN] [BATCH]\n");
    return 2;
  }
  int64_t vocab = std::atoll(argv[1]), n = std::atoll(argv[2]);
  int64_t begin = argc > 3 ? std::atoll(argv[3]) : 0;
  int64_t batch = argc > 4 ? std::atoll(argv[4]) : 512;
  if (vocab <= 0 || (vocab & (vocab - 1)) || n <= 0 || batch <= 0) {
    std::fprintf(stderr,
                 "hb_synth_gen: VOCAB a power of two, SAMPLES and BATCH > 0\n");
    return 2;
  }
  // CPU time of this thread besides wall time: on a shared machine the
  // wall time includes other tasks' slices, the CPU time does not.
  auto cpu_ns = [] {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
  };
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  synth::Generator gen(2026, vocab, 1.1);  // the demo's default seed and alpha
  auto t1 = clock::now();
  double c1 = cpu_ns();
  std::vector<synth::Sample> out(static_cast<size_t>(batch));
  uint64_t digest = 0;
  for (int64_t i = 0; i < n; i += batch) {
    int64_t m = std::min(batch, n - i);
    for (int64_t k = 0; k < m; ++k) gen.sample(0, begin + i + k, &out[k]);
    // Fold every byte in, so the work cannot be dropped and any change of
    // a sample shows.
    for (int64_t k = 0; k < m; ++k) {
      uint64_t w[sizeof(synth::Sample) / 8 + 1] = {};
      std::memcpy(w, &out[k], sizeof(synth::Sample));
      for (uint64_t x : w) digest = synth::mix(digest ^ x);
    }
  }
  double c2 = cpu_ns();
  auto t2 = clock::now();
  std::printf(
      "setup_ms %.1f gen_ns_per_sample %.1f cpu_ns_per_sample %.1f digest "
      "%016" PRIx64 "\n",
      std::chrono::duration<double, std::milli>(t1 - t0).count(),
      std::chrono::duration<double, std::nano>(t2 - t1).count() / n,
      (c2 - c1) / n, digest);
  return 0;
}
