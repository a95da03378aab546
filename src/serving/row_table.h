// The rows of one serving replica, stored in hash-slot order: id -> slot by
// linear probing over a key array, and the row of slot s at s * dim in a
// row array. A lookup's key and row addresses both follow from the id's
// hash, so the CPU fetches them together (the probe's exit is a predicted
// branch, not a data dependency): one memory latency per lookup instead of
// two back to back (hash slot, then the row it names). A caller that cannot
// overlap one call's misses with the next call's (JNI, cgo) pays that
// latency in full on every call. Both arrays live on huge pages
// (huge_pages.h), so the random reads miss no TLB.
//
// Memory: at most 1 / kMinLoad slots per row after a rebuild (key + row
// each), and the load stays at most kMaxLoad while deltas insert.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "serving/huge_pages.h"

namespace hb {
namespace serving {

class RowTable {
 public:
  // Room for `expected` rows of `dim` floats without a rebuild.
  RowTable(int64_t dim, size_t expected);

  size_t size() const { return size_; }
  size_t slots() const { return cap_; }

  // The row of id, or nullptr.
  const float *find(int64_t id) const {
    if (id == kFree) return has_free_key_ ? row(cap_) : nullptr;
    for (size_t s = home(id);;) {
      const int64_t k = keys_[s];
      if (k == id) return row(s);
      if (k == kFree) return nullptr;
      if (++s == cap_) s = 0;
    }
  }
  // Hints the CPU to fetch what find(id) reads first (batched lookups).
  void prefetch(int64_t id) const {
    const size_t s = home(id);
    __builtin_prefetch(&keys_[s]);
    __builtin_prefetch(row(s));
  }

  // Stores row as id's row; returns true when id was new. May rebuild.
  bool put(int64_t id, const float *row);
  // Removes id; returns whether it was there.
  bool erase(int64_t id);

  // Calls f(id, row) for every row, in slot order.
  template <class F>
  void for_each(F &&f) const {
    for (size_t s = 0; s < cap_; ++s)
      if (keys_[s] != kFree) f(keys_[s], row(s));
    if (has_free_key_) f(kFree, row(cap_));
  }

 private:
  // Marks a free slot. Any int64 is a valid id: id kFree itself keeps its
  // row in the extra slot cap_.
  static constexpr int64_t kFree = INT64_MIN;
  static constexpr double kMinLoad = 0.6, kMaxLoad = 0.8;

  size_t home(int64_t id) const {
    // Fibonacci hashing, then the high bits of hash * cap: a slot in
    // [0, cap) for any cap, so the table needs no power-of-two size.
    const uint64_t h = static_cast<uint64_t>(id) * 0x9E3779B97F4A7C15ull;
    return static_cast<size_t>((static_cast<unsigned __int128>(h) * cap_) >>
                               64);
  }
  const float *row(size_t s) const { return rows_.data() + s * dim_; }
  float *row(size_t s) { return rows_.data() + s * dim_; }
  void rebuild(size_t expected);

  int64_t dim_;
  size_t row_bytes_;
  size_t cap_ = 0;
  size_t size_ = 0;
  bool has_free_key_ = false;
  std::vector<int64_t, HugePageAllocator<int64_t>> keys_;  // cap_
  std::vector<float, HugePageAllocator<float>> rows_;      // (cap_ + 1) x dim
};

}  // namespace serving
}  // namespace hb
