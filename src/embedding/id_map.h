// Open-addressing hash map from a 64-bit id to a 32-bit index, used for the
// per-call dedup scratch, the rows of a dynamic shard and the serving table.
// Any int64 is a valid key: emptiness is marked in the value array.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace hb {
namespace emb {

class IdMap {
 public:
  static constexpr uint32_t kEmpty = 0xffffffffu;

  explicit IdMap(size_t expected = 0) { reset(expected); }

  // Empties the map and sizes it for `expected` keys (load <= 1/2).
  void reset(size_t expected) {
    int bits = 4;
    while ((size_t{1} << bits) < 2 * expected) ++bits;
    if (bits != bits_ || vals_.empty()) {
      bits_ = bits;
      keys_.assign(size_t{1} << bits, 0);
      vals_.assign(size_t{1} << bits, kEmpty);
    } else {
      std::fill(vals_.begin(), vals_.end(), kEmpty);
    }
    size_ = 0;
  }

  size_t size() const { return size_; }
  size_t capacity() const { return vals_.size(); }
  size_t memory_bytes() const { return vals_.size() * 12; }

  // Index stored for id, or kEmpty.
  uint32_t find(int64_t id) const {
    size_t mask = vals_.size() - 1;
    for (size_t i = slot(id);; i = (i + 1) & mask) {
      if (vals_[i] == kEmpty) return kEmpty;
      if (keys_[i] == id) return vals_[i];
    }
  }

  // Returns the index stored for id; when absent stores `value` and sets
  // *inserted. Grows past load 1/2.
  uint32_t insert(int64_t id, uint32_t value, bool *inserted) {
    if (2 * (size_ + 1) > vals_.size()) grow();
    size_t mask = vals_.size() - 1;
    for (size_t i = slot(id);; i = (i + 1) & mask) {
      if (vals_[i] == kEmpty) {
        keys_[i] = id;
        vals_[i] = value;
        ++size_;
        *inserted = true;
        return value;
      }
      if (keys_[i] == id) {
        *inserted = false;
        return vals_[i];
      }
    }
  }

  // Removes id; returns the index it had, or kEmpty when absent.
  // Backward-shift deletion: the entries after the hole that may move into
  // it do, so probe chains stay intact without tombstones.
  uint32_t erase(int64_t id) {
    const size_t mask = vals_.size() - 1;
    size_t i = slot(id);
    for (;; i = (i + 1) & mask) {
      if (vals_[i] == kEmpty) return kEmpty;
      if (keys_[i] == id) break;
    }
    const uint32_t v = vals_[i];
    size_t hole = i;
    for (size_t j = (i + 1) & mask; vals_[j] != kEmpty; j = (j + 1) & mask) {
      // An entry may fill the hole unless its home slot lies cyclically in
      // (hole, j]: then a lookup would start past the hole.
      const size_t home = slot(keys_[j]);
      const bool stays =
          hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
      if (stays) continue;
      keys_[hole] = keys_[j];
      vals_[hole] = vals_[j];
      hole = j;
    }
    vals_[hole] = kEmpty;
    --size_;
    return v;
  }

  // Calls f(id, index) for every entry, in slot order.
  template <class F>
  void for_each(F &&f) const {
    for (size_t i = 0; i < vals_.size(); ++i)
      if (vals_[i] != kEmpty) f(keys_[i], vals_[i]);
  }

 private:
  size_t slot(int64_t id) const {
    // Fibonacci hashing: the top bits of a multiply mix every input bit,
    // so ids that share a residue mod the world size still spread.
    return static_cast<size_t>(
        (static_cast<uint64_t>(id) * 0x9E3779B97F4A7C15ull) >> (64 - bits_));
  }
  void grow() {
    std::vector<int64_t> keys;
    std::vector<uint32_t> vals;
    keys.swap(keys_);
    vals.swap(vals_);
    ++bits_;
    keys_.assign(size_t{1} << bits_, 0);
    vals_.assign(size_t{1} << bits_, kEmpty);
    size_ = 0;
    bool ins;
    for (size_t i = 0; i < vals.size(); ++i)
      if (vals[i] != kEmpty) insert(keys[i], vals[i], &ins);
  }

  int bits_ = 0;
  size_t size_ = 0;
  std::vector<int64_t> keys_;
  std::vector<uint32_t> vals_;
};

// Deduplicates a batch of ids: unique() in first-occurrence order and, for
// every input position, the index of its id in unique(). Reuses its
// buffers across calls; its hash table is generation-stamped, so a call
// never clears it.
class Dedup {
 public:
  // Static tables of at most this many rows take the array path below: its
  // index costs 4 bytes per row, once per thread, 1 MiB at the cap (about a
  // core's L2). Past it, ids scattered over a larger index miss the cache
  // where the batch's hash table (2 slots per id) stays in it: indexing the
  // demo's 3.4M-row wide table too (13 MiB), its dedup missed a 1 MiB L2
  // 1.5x as often (cachegrind, 131072-row tables).
  static constexpr uint64_t kDirectRows = uint64_t{1} << 18;

  // With bound > 0 (a static table's rows) and at most kDirectRows, or
  // small beside the batch's hash table: when every id lies in [0, bound),
  // the ids index an array directly: no hash, no probe chain. Returns true
  // when it checked that every id lies in [0, bound); the result is the
  // same either way.
  bool run(const int64_t *ids, size_t n, int64_t bound) {
    prepare(n);
    if (bound > 0 &&
        (static_cast<uint64_t>(bound) <= kDirectRows ||
         static_cast<uint64_t>(bound) <= 8 * slots_.size()) &&
        run_direct(ids, n, static_cast<uint64_t>(bound)))
      return true;
    run_hashed(ids, n);  // the table prepared above serves it
    return false;
  }
  void run(const int64_t *ids, size_t n) {
    prepare(n);
    run_hashed(ids, n);
  }
  const std::vector<int64_t> &unique() const { return unique_; }
  const std::vector<uint32_t> &inverse() const { return inverse_; }

 private:
  void run_hashed(const int64_t *ids, size_t n) {
    unique_.clear();
    inverse_.resize(n);
    const size_t mask = slots_.size() - 1;
    for (size_t i = 0; i < n; ++i) {
      const int64_t id = ids[i];
      size_t s = static_cast<size_t>(
          (static_cast<uint64_t>(id) * 0x9E3779B97F4A7C15ull) >> (64 - bits_));
      for (;; s = (s + 1) & mask) {
        Slot &e = slots_[s];
        if (e.gen != gen_) {
          e.gen = gen_;
          e.key = id;
          e.val = static_cast<uint32_t>(unique_.size());
          unique_.push_back(id);
          inverse_[i] = e.val;
          break;
        }
        if (e.key == id) {
          inverse_[i] = e.val;
          break;
        }
      }
    }
  }
  struct Slot {
    int64_t key;
    uint32_t val;
    uint32_t gen;  // the slot is used in this call iff gen == gen_
  };
  // The array path's index, one per thread and shared by every Dedup on it
  // (the tables of a step touch one array, not one each): at[id] is id's
  // index in unique() iff it is below the count so far and unique() holds
  // id there (a sparse set), so no call clears it and stale entries, from
  // this call's start or another Dedup's, read as absent. Zero-filled when
  // it grows, so nothing uninitialized is read.
  static std::vector<uint32_t> &direct_index() {
    static thread_local std::vector<uint32_t> at;
    return at;
  }
  // False (and nothing to use) at the first id outside [0, bound).
  bool run_direct(const int64_t *ids, size_t n, uint64_t bound) {
    std::vector<uint32_t> &index = direct_index();
    if (index.size() < bound) index.assign(bound, 0);
    // Appended, not resize(n) and back to the count: a resize up
    // zero-fills every slot past the last call's count first (a memset of
    // the duplicates' share of the batch, every call). No reallocation
    // below, so u stays valid.
    unique_.clear();
    unique_.reserve(n);
    inverse_.resize(n);
    const int64_t *u = unique_.data();
    uint32_t *inv = inverse_.data();
    uint32_t *at = index.data();
    uint32_t nu = 0;
    for (size_t i = 0; i < n; ++i) {
      const int64_t id = ids[i];
      if (static_cast<uint64_t>(id) >= bound) return false;
      uint32_t v = at[id];
      if (v >= nu || u[v] != id) {
        v = nu++;
        at[id] = v;
        unique_.push_back(id);
      }
      inv[i] = v;
    }
    return true;
  }
  void prepare(size_t n) {
    int bits = 4;
    while ((size_t{1} << bits) < 2 * n) ++bits;
    if (bits > bits_ || ++gen_ == 0) {
      bits_ = std::max(bits, bits_);
      slots_.assign(size_t{1} << bits_, Slot{0, 0, 0});
      gen_ = 1;
    }
  }
  int bits_ = 0;
  uint32_t gen_ = 0;
  std::vector<Slot> slots_;
  std::vector<int64_t> unique_;
  std::vector<uint32_t> inverse_;
};

}  // namespace emb
}  // namespace hb
