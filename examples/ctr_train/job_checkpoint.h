// The demo's whole-job checkpoints (hb_checkpoint_*, docs/fault-tolerance.md)
// with --checkpoint-dir D --checkpoint-every N: every table of the
// collection, the dense parameters and their Adagrad slots, the position in
// the data (each rank's offset in its synthetic shard, or the hb_reader's
// position with --data), the running metric, and a tally of the samples
// trained (their count and two sums of per-sample fingerprints), so a test
// can prove that every sample was trained exactly once across restarts.
//
// Under `hbrun --max-restarts`, a restarted job resumes from the newest
// complete checkpoint. Test hooks (environment, for tests/launcher's chaos
// tests): CTR_TRAIN_TEST_KILL=save:R:S:US makes rank R SIGKILL itself at a
// random moment within US microseconds after the save of step S starts (on
// the first start only); restore:R:K:US the same during the restore of
// restart K (HB_RESTART_COUNT); several entries separated by commas. The
// delay is drawn from --seed and printed.
#pragma once

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "hb.h"
#include "synth_data.h"

namespace ckpt {

// FNV-1a, 64-bit: the fingerprints and digests of this file.
inline uint64_t fnv(const void *data, size_t n,
                    uint64_t h = 0xcbf29ce484222325ull) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// A sample's fingerprint: its label, dense values and ids.
inline uint64_t fingerprint(const synth::Sample &s) {
  uint64_t h = fnv(&s.label, sizeof s.label);
  h = fnv(s.dense, sizeof s.dense, h);
  return fnv(s.ids, sizeof s.ids, h);
}

// Samples trained, over all ranks: count, and the wrapping sums of their
// fingerprints and of the fingerprints squared. Two runs that train the
// same samples the same number of times end with the same tally; a sample
// trained twice or skipped changes it.
struct Tally {
  int64_t count = 0;
  uint64_t sum = 0, sum_sq = 0;
  void add(uint64_t f) { ++count, sum += f, sum_sq += f * f; }
};

class KillHook {
 public:
  // Parses CTR_TRAIN_TEST_KILL (comma-separated kind:rank:at:us entries)
  // for this rank's entry of kind `what` ("save" or "restore").
  KillHook(const char *what, int rank, uint64_t seed) {
    const char *v = std::getenv("CTR_TRAIN_TEST_KILL");
    for (const char *p = v; p && *p;) {
      char kind[16] = {0};
      int r = -1;
      long long at = -1, us = 0;
      if (std::sscanf(p, "%15[a-z]:%d:%lld:%lld", kind, &r, &at, &us) == 4 &&
          std::strcmp(kind, what) == 0 && r == rank) {
        armed_ = true, at_ = at;
        delay_us_ = static_cast<int64_t>(
            synth::mix(seed ^ 0x6b696c6cull ^ static_cast<uint64_t>(at)) %
            static_cast<uint64_t>(us > 0 ? us : 1));
      }
      p = std::strchr(p, ',');
      if (p) ++p;
    }
  }
  // Starts the timer when `at` is the armed step or restart.
  void maybe_fire(int64_t at, const char *doing) {
    if (!armed_ || at != at_) return;
    std::printf("test: rank killing itself %" PRId64 " us into %s %" PRId64
                "\n",
                delay_us_, doing, at);
    std::fflush(stdout);
    int64_t us = delay_us_;
    std::thread([us] {
      timespec ts{static_cast<time_t>(us / 1000000),
                  static_cast<long>(us % 1000000) * 1000};
      nanosleep(&ts, nullptr);
      raise(SIGKILL);
    }).detach();
  }

 private:
  bool armed_ = false;
  int64_t at_ = -1, delay_us_ = 0;
};

inline double wall_s() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

}  // namespace ckpt
