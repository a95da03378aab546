// Prints samples of examples/ctr_train/synth_data.h, one per line, so the
// numpy port (synth_data.py) can be checked against the C++ generator:
//
//   synth_dump SEED VOCAB SPLIT BEGIN END
//
// Line: index, 26 ids, 13 dense features and the planted probability as
// hex floats (exact), then the label.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>

#include "synth_data.h"

int main(int argc, char **argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: synth_dump SEED VOCAB SPLIT BEGIN END\n");
    return 2;
  }
  uint64_t seed = std::strtoull(argv[1], nullptr, 10);
  int64_t vocab = std::atoll(argv[2]);
  int split = std::atoi(argv[3]);
  int64_t begin = std::atoll(argv[4]), end = std::atoll(argv[5]);
  if (vocab <= 0 || (vocab & (vocab - 1))) {
    std::fprintf(stderr, "synth_dump: VOCAB must be a power of two\n");
    return 2;
  }
  synth::Generator gen(seed, vocab, 1.1);
  synth::Sample s;
  for (int64_t i = begin; i < end; ++i) {
    gen.sample(split, i, &s);
    std::printf("%" PRId64, i);
    for (int t = 0; t < synth::kTables; ++t) std::printf(" %" PRId64, s.ids[t]);
    for (int j = 0; j < synth::kDense; ++j) std::printf(" %a", s.dense[j]);
    std::printf(" %a %d\n", s.planted_prob, static_cast<int>(s.label));
  }
  return 0;
}
