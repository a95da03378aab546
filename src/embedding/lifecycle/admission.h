// Admission: an id gets a row only once it was seen min_count times, where
// "seen" is once per update step whose batch (on any rank) carries it --
// the owner sees each id of a step exactly once after its dedup, so the
// count does not depend on how the batch was split over ranks.
//
// Two counters:
// - exact (Admit::kCount): an id -> {count, last step seen} table on the
//   owner, with deletion; an admitted id's counter is dropped (an evicted
//   id counts again from zero), and with ttl_steps a counter not seen for
//   ttl_steps steps is dropped at a boundary (bounded memory).
// - counting Bloom filter (Admit::kBloom): bloom_bytes / world 8-bit
//   saturating counters per rank, k hashes; a step adds one to each of an
//   id's k counters (never removed), its count is their minimum, which
//   never undercounts: an id is admitted no later than the exact counter
//   would admit it, earlier when all its counters collide. Which ids
//   collide depends on the filter size per rank, i.e. on the world size.
//
// Within a step every id is counted before any is tested, so the result
// does not depend on the order of the step's ids.
#pragma once

#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "embedding/id_map.h"
#include "embedding/lifecycle/policy.h"

namespace hb {
namespace lifecycle {

class Admission {
 public:
  Admission(const Policy &p, int world);

  bool on() const { return on_; }
  // One sighting of id at update step `step` (each id once per step).
  void count(int64_t id, uint64_t step);
  // Has id reached min_count?
  bool admitted(int64_t id) const;
  // id got its row: its exact counter is no longer needed.
  void forget(int64_t id);
  // Drops the exact counters last seen ttl or more steps before `step`
  // (p.ttl_steps; nothing when 0). Amortized O(1) per sighting: sightings
  // are queued in step order, and a queued sighting that is no longer its
  // counter's last is skipped.
  void expire(uint64_t step);

  // Exact counters pending admission.
  int64_t pending() const { return static_cast<int64_t>(map_.size()); }
  size_t memory_bytes() const;

  // Checkpoints: the exact counters, and the Bloom filter's cells.
  struct Counter {
    int64_t id;
    uint32_t count;
    uint64_t last_seen;
  };
  template <class F>
  void for_each_counter(F &&f) const {
    map_.for_each([&](int64_t id, uint32_t slot) {
      const Slot &s = slots_[slot];
      f(Counter{id, s.count, s.last_seen});
    });
  }
  void restore(const Counter &c);
  void restored();  // after the last restore()
  const std::vector<uint8_t> &cells() const { return cells_; }
  std::vector<uint8_t> &cells() { return cells_; }
  void clear();

 private:
  struct Slot {
    uint32_t count;
    uint64_t last_seen;
  };
  uint32_t bloom_count(int64_t id) const;
  // The exact counter of id, created (zero) when absent.
  Slot &slot_of(int64_t id);

  bool on_;
  Admit kind_;
  uint32_t min_count_;
  int hashes_ = 0;
  emb::IdMap map_;  // exact: id -> slot
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
  std::vector<uint8_t> cells_;  // Bloom
  uint64_t ttl_ = 0;            // exact: counters' time to live (steps)
  std::deque<std::pair<uint64_t, int64_t>> sightings_;  // (step, id)
};

}  // namespace lifecycle
}  // namespace hb
