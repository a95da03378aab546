#include "ps/clock.h"

#include <algorithm>

namespace hb {
namespace ps {

int64_t StalenessClock::slowest() const {
  int64_t s = kNone;
  for (size_t r = 0; r < state_.size(); ++r)
    if (state_[r] == kExpected || state_[r] == kLive)
      s = std::min(s, clock_[r]);
  return s;
}

int64_t StalenessClock::lead(int r) const {
  int64_t s = std::min(slowest(), clock_[r]);
  return clock_[r] - s;
}

void StalenessClock::revive(int r) {
  if (state_[r] == kLost || state_[r] == kLeft) {
    int64_t s = slowest();
    clock_[r] = std::max(clock_[r], s == kNone ? floor_ : s);
  }
  state_[r] = kLive;
  settle();
}

}  // namespace ps
}  // namespace hb
