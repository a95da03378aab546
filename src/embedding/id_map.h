// Open-addressing hash map from a 64-bit id to a 32-bit index, used for the
// per-call dedup scratch, the rows of a dynamic shard and the serving table.
// Any int64 is a valid key: emptiness is marked in the value array.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
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
    const int64_t count = static_cast<int64_t>(n);
    return run_blocks(&ids, &count, 1, bound, /*unique_blocks=*/false);
  }
  void run(const int64_t *ids, size_t n) { run(ids, n, 0); }
  // The same result as run() over the concatenation of nblocks blocks
  // (counts[b] ids each) when no block holds an id twice, as an owner's
  // blocks from senders that each deduplicated their ids: the first
  // non-empty block is all new (stored, never compared) and the last one is
  // only looked up (what it adds no later id can repeat, so it is not
  // stored). With a duplicate inside a block the result is unspecified.
  bool run_unique_blocks(const int64_t *ids, const int64_t *counts,
                         size_t nblocks, int64_t bound) {
    starts_.resize(nblocks);
    for (size_t b = 0; b < nblocks; ids += counts[b], ++b) starts_[b] = ids;
    return run_unique_blocks(starts_.data(), counts, nblocks, bound);
  }
  // The same, block b's ids at blocks[b] (an owner's blocks where they
  // arrived: no copy into one array first).
  bool run_unique_blocks(const int64_t *const *blocks, const int64_t *counts,
                         size_t nblocks, int64_t bound) {
    return run_blocks(blocks, counts, nblocks, bound, /*unique_blocks=*/true);
  }
  const std::vector<int64_t> &unique() const { return unique_; }
  const std::vector<uint32_t> &inverse() const { return inverse_; }
  // How many leading positions hold new ids in order (inverse()[i] == i):
  // after run_unique_blocks the first non-empty block's count, else 0.
  // A sum over the positions (sum_rows) copies those rows in one piece.
  size_t leading_new() const { return leading_new_; }

 private:
  // What a block's id needs: kStore (a block all new), kFind (no later
  // block repeats its new ids), or both.
  enum Mode { kStore = 1, kFind = 2, kBoth = 3 };

  bool run_blocks(const int64_t *const *blocks, const int64_t *counts,
                  size_t nblocks, int64_t bound, bool unique_blocks) {
    size_t n = 0;
    size_t first = nblocks, last = 0;  // the non-empty blocks' ends
    for (size_t b = 0; b < nblocks; ++b) {
      n += static_cast<size_t>(counts[b]);
      if (counts[b] > 0) last = b, first = std::min(first, b);
    }
    leading_new_ = unique_blocks && first < nblocks ? counts[first] : 0;
    prepare(n);
    // Written through a pointer into a buffer that only grows (no capacity
    // check per new id; a new id's index is at most its position), then
    // copied out: a resize of unique() back up to n would zero-fill the
    // duplicates' share of the batch element by element, every call.
    if (work_.size() < std::max<size_t>(n, 1))
      work_.resize(std::max<size_t>(n, 1));
    inverse_.resize(n);
    auto mode = [&](size_t b) {
      if (!unique_blocks) return kBoth;
      return b == first ? kStore : b == last ? kFind : kBoth;
    };
    bool direct =
        bound > 0 && (static_cast<uint64_t>(bound) <= kDirectRows ||
                      static_cast<uint64_t>(bound) <= 8 * slots_.size());
    uint32_t nu = 0;
    if (direct) {
      std::vector<uint32_t> &index = direct_index();
      if (index.size() < static_cast<uint64_t>(bound)) index.assign(bound, 0);
      size_t at = 0;
      for (size_t b = 0; b < nblocks && direct; at += counts[b], ++b)
        direct = each_block(mode(b), [&](auto m) {
          return run_direct<decltype(m)::value>(
              blocks[b], static_cast<size_t>(counts[b]),
              static_cast<uint64_t>(bound), index.data(), at, &nu);
        });
    }
    if (!direct) {  // the table prepare() sized serves it
      nu = 0;
      size_t at = 0;
      for (size_t b = 0; b < nblocks; at += counts[b], ++b)
        each_block(mode(b), [&](auto m) {
          run_hashed<decltype(m)::value>(
              blocks[b], static_cast<size_t>(counts[b]), at, &nu);
          return true;
        });
    }
    unique_.assign(work_.data(), work_.data() + nu);
    return direct;
  }
  template <class F>
  static bool each_block(Mode m, F &&f) {
    if (m == kStore) return f(std::integral_constant<int, kStore>());
    if (m == kFind) return f(std::integral_constant<int, kFind>());
    return f(std::integral_constant<int, kBoth>());
  }

  // Ids ids[0, n) at batch positions at.. (their inverse entries).
  template <int kMode>
  void run_hashed(const int64_t *ids, size_t n, size_t at, uint32_t *nu) {
    const size_t mask = slots_.size() - 1;
    int64_t *u = work_.data();
    uint32_t *inv = inverse_.data() + at;
    uint32_t k = *nu;
    for (size_t i = 0; i < n; ++i) {
      const int64_t id = ids[i];
      size_t s = static_cast<size_t>(
          (static_cast<uint64_t>(id) * 0x9E3779B97F4A7C15ull) >> (64 - bits_));
      for (;; s = (s + 1) & mask) {
        Slot &e = slots_[s];
        if (e.gen != gen_) {
          if (kMode & kStore) e = Slot{id, k, gen_};
          u[k] = id;
          inv[i] = k++;
          break;
        }
        if ((kMode & kFind) && e.key == id) {
          inv[i] = e.val;
          break;
        }
      }
    }
    *nu = k;
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
  template <int kMode>
  bool run_direct(const int64_t *ids, size_t n, uint64_t bound, uint32_t *index,
                  size_t at, uint32_t *nu) {
    int64_t *u = work_.data();
    const uint32_t last = static_cast<uint32_t>(work_.size() - 1);
    uint32_t *inv = inverse_.data() + at;
    uint32_t k = *nu;
    for (size_t i = 0; i < n; ++i) {
      const int64_t id = ids[i];
      if (static_cast<uint64_t>(id) >= bound) return false;
      if (kMode == kStore) {
        index[id] = k;
        u[k] = id;
        inv[i] = k++;
        continue;
      }
      // Without branches on the outcome: whether an id repeats follows
      // the data (a Zipf head repeats, its tail does not), so a branch on
      // it mispredicts often. u[k] is written either way (a repeat's write
      // lies past the count). The load's index is clamped to the buffer,
      // not to k: an entry out of range reads some slot of work_, which
      // v < k rejects, and the load does not wait for the previous id's
      // count (v < k ? u[v] : ... compiled back into a branch).
      const uint32_t v = index[id];
      uint32_t seen = static_cast<uint32_t>(v < k) &
                      static_cast<uint32_t>(u[std::min(v, last)] == id);
      // Opaque, and the selects in arithmetic: with either visible, GCC
      // split this loop into branches on v < k and u[..] == id again (a
      // seen id's store of r stores back the v just loaded, which it
      // dropped on its own path). libhb.so's copy did, at 1.3-1.9x the
      // dedup's CPU inside the demo; bench/dedup_cost's happened not to.
      asm("" : "+r"(seen));
      const uint32_t r = k + ((v - k) & (0u - seen));  // seen ? v : k
      if (kMode & kStore) index[id] = r;
      u[k] = id;
      inv[i] = r;
      k += 1 - seen;
    }
    *nu = k;
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
  std::vector<int64_t> unique_, work_;  // work_: unique() as it is built
  std::vector<uint32_t> inverse_;
  std::vector<const int64_t *> starts_;  // run_unique_blocks' block starts
  size_t leading_new_ = 0;
};

}  // namespace emb
}  // namespace hb
