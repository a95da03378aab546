// Monotonic deadlines: every wait in hb is bounded by one of these.
#pragma once

#include <chrono>
#include <cstdint>

namespace hb {

using Clock = std::chrono::steady_clock;

class Deadline {
 public:
  explicit Deadline(int64_t timeout_ms)
      : end_(Clock::now() + std::chrono::milliseconds(timeout_ms)) {}
  bool expired() const { return Clock::now() >= end_; }
  int64_t remaining_ms() const {
    auto d = std::chrono::duration_cast<std::chrono::milliseconds>(end_ - Clock::now()).count();
    return d > 0 ? d : 0;
  }
  Clock::time_point time_point() const { return end_; }

 private:
  Clock::time_point end_;
};

inline int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             Clock::now().time_since_epoch())
      .count();
}

}  // namespace hb
