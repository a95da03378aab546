// The staleness clock of one ps table (stale-synchronous parallel).
//
// Every worker rank of the job has a clock: the pushes of the table it made
// in this job (a rank that rejoins after being lost starts at the slowest
// active clock, or at the open round with staleness 0). A rank is active
// while it is expected (not yet attached, within the connect window) or
// attached and alive; lost and detached ranks hold nobody back. A pull or
// push of rank r may go ahead when clock[r] - slowest <= k, slowest being
// the smallest active clock: no worker runs more than k steps ahead of the
// slowest live one. With k = 0 that makes rounds: round n is complete once
// every active rank pushed n + 1 times.
//
// With the age bound (option staleness_bound=age, k > 0) nobody waits: the
// gate is open, and the table's version (owned_table.h) bounds how stale a
// push's gradients may be instead. k = 0 makes rounds in either mode.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace hb {
namespace ps {

class StalenessClock {
 public:
  enum State : uint8_t { kExpected, kLive, kLost, kLeft };
  static constexpr int64_t kNone = std::numeric_limits<int64_t>::max();

  StalenessClock(int world, int64_t k, bool age = false)
      : k_(k), age_(age && k > 0), state_(world, kExpected), clock_(world, 0) {}

  int world() const { return static_cast<int>(state_.size()); }
  int64_t bound() const { return k_; }
  State state(int r) const { return state_[r]; }
  int64_t clock(int r) const { return clock_[r]; }

  // The smallest clock of the active ranks; kNone when none is active.
  int64_t slowest() const;
  // clock[r] - slowest(), counting r itself as active.
  int64_t lead(int r) const;
  // The age bound (k > 0) never holds a worker back.
  bool by_age() const { return age_; }
  bool may_go(int r) const { return age_ || lead(r) <= k_; }

  // A lost rank is back (it speaks again, or reconnects after a restart):
  // it resumes at the slowest active clock (at least its own), so it
  // cannot hold the others back for the steps it missed. The server does
  // this for all of the rank's tables at one instant (hello), so that its
  // clocks stand to each other as a live worker's do.
  void revive(int r);
  // r attached (first time, or again after a restart: revived already).
  void attach(int r) {
    if (state_[r] == kLost || state_[r] == kLeft) return revive(r);
    state_[r] = kLive;
    settle();
  }
  void lost(int r) { set_inactive(r, kLost); }
  void left(int r) { set_inactive(r, kLeft); }
  // Workers joined beyond the world (elastic): the new ranks hold nobody
  // back until they attach, and then start at the slowest clock (revive).
  void grow(int world) {
    if (world <= this->world()) return;
    state_.resize(world, kLeft);
    clock_.resize(world, 0);
  }
  // r pushed once more.
  void tick(int r) {
    ++clock_[r];
    settle();
  }

 private:
  void set_inactive(int r, State s) {
    if (state_[r] == kExpected || state_[r] == kLive) state_[r] = s;
    settle();
  }
  // floor_: the largest slowest clock so far (where a rank that rejoins an
  // idle table resumes).
  void settle() {
    int64_t s = slowest();
    if (s != kNone && s > floor_) floor_ = s;
  }
  int64_t k_;
  bool age_;
  int64_t floor_ = 0;
  std::vector<State> state_;
  std::vector<int64_t> clock_;
};

}  // namespace ps
}  // namespace hb
