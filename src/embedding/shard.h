// One rank's shard of a table: row records (weights + optimizer slots)
// for the ids this rank owns. Static tables hold every owned row densely,
// initialized at creation; dynamic tables keep an id -> record hash map and
// create records on first touch, in fixed-size chunks (no reallocation, so
// growth never copies the table). A dynamic shard can erase rows (the
// table's lifecycle evicts them): their record slots go on a free list and
// are reused by the next rows created, so memory follows the live rows.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "embedding/id_map.h"
#include "embedding/lifecycle/row_meta.h"
#include "embedding/optimizer.h"
#include "embedding/spec.h"

namespace hb {
namespace emb {

// Which rank owns an id, and the owner's dense index of it (static tables).
struct Partitioner {
  int world = 1;
  int32_t kind = HB_PARTITION_MOD;
  int64_t num_rows = 0;
  int64_t block = 0;  // DIV: ceil(num_rows / world)
  // MOD over a world of 2^shift ranks (else -1): a mask and a shift instead
  // of a 64-bit division, which every id of a step pays several times.
  int shift = 0;

  Partitioner() = default;
  Partitioner(const Spec &s, int world_size);
  int owner(int64_t id) const {
    if (kind == HB_PARTITION_DIV) return static_cast<int>(id / block);
    if (shift >= 0)
      return static_cast<int>(static_cast<uint64_t>(id) &
                              (static_cast<uint64_t>(world) - 1));
    return static_cast<int>(static_cast<uint64_t>(id) %
                            static_cast<uint64_t>(world));
  }
  int64_t local_index(int64_t id) const {  // static tables only: id >= 0
    if (kind == HB_PARTITION_DIV) return id % block;
    if (shift >= 0) return id >> shift;
    return id / world;
  }
  int64_t global_id(int rank, int64_t local) const {
    if (kind == HB_PARTITION_DIV) return rank * block + local;
    return local * world + rank;
  }
  int64_t local_rows(int rank) const;  // static tables only
};

// Row records start on a cache line (64 bytes): a record of 64 bytes or
// less (Adagrad at dim <= 8, say) then never straddles two lines, so the
// sparse update touches one line per row, not two. Only the memory layout
// changes: checkpoints and exports copy records row by row.
constexpr size_t kRecordAlign = 64;
template <class T>
struct LineAllocator {
  using value_type = T;
  LineAllocator() = default;
  template <class U>
  LineAllocator(const LineAllocator<U> &) {}
  T *allocate(size_t n) {
    return static_cast<T *>(
        ::operator new(n * sizeof(T), std::align_val_t(kRecordAlign)));
  }
  void deallocate(T *p, size_t) {
    ::operator delete(p, std::align_val_t(kRecordAlign));
  }
  bool operator==(const LineAllocator &) const { return true; }
  bool operator!=(const LineAllocator &) const { return false; }
};
struct LineDelete {
  void operator()(float *p) const {
    ::operator delete[](p, std::align_val_t(kRecordAlign));
  }
};

class Shard {
 public:
  Shard(const Spec &spec, int rank, int world);

  const Spec &spec() const { return spec_; }
  const Optimizer &optimizer() const { return opt_; }
  int64_t record_words() const { return words_; }
  int64_t rows() const;
  // Record slots (live rows plus free ones): record indices are < slots().
  int64_t slots() const;
  // Bytes of row records plus index structures.
  size_t memory_bytes() const;

  // The record of an owned id; a dynamic shard creates it (initialized)
  // when absent.
  float *get(int64_t id) {
    if (!spec_.dynamic()) return dense_.data() + part_.local_index(id) * words_;
    uint32_t idx = map_.find(id);
    if (idx == IdMap::kEmpty) return create(id);
    return record(idx);
  }
  // Starts loading the record of an owned id of a static shard into the
  // cache, for a loop that reads it a few ids later (random rows of a large
  // table are memory-bound); a dynamic shard does nothing.
  void prefetch(int64_t id) const {
    if (spec_.dynamic()) return;
    prefetch_record(dense_.data() + part_.local_index(id) * words_);
  }
  // Every cache line of the record at r (a record wider than 64 bytes, or
  // one not a divisor of 64 bytes wide, spans several lines).
  // The empty volatile asm keeps the prefetches: without it GCC's pure-const
  // analysis took a function that only prefetches (this one, or a loop of
  // calls to it) for one without effects and dropped the calls, so the
  // owners' loops never prefetched (no prefetch instruction in
  // Table::encode_rows or Table::step_rows at -O3).
  void prefetch_record(const float *r) const {
    const uintptr_t first = reinterpret_cast<uintptr_t>(r) & ~uintptr_t{63};
    const uintptr_t last = reinterpret_cast<uintptr_t>(r + words_ - 1);
    for (uintptr_t a = first; a <= last; a += 64) {
      __builtin_prefetch(reinterpret_cast<const void *>(a), 1);
      asm volatile("" ::"r"(a));
    }
  }
  // Static shards: the record of an owned id, without get()'s test for a
  // dynamic shard (a loop over many ids tests that once).
  float *static_record(int64_t id) {
    return dense_.data() + part_.local_index(id) * words_;
  }
  // A static shard's records, densely by local index (record i at
  // dense_records() + i * record_words()); nullptr for a dynamic shard.
  const float *dense_records() const {
    return spec_.dynamic() ? nullptr : dense_.data();
  }
  // Dynamic: nullptr when absent.
  const float *find(int64_t id) const {
    if (!spec_.dynamic()) return dense_.data() + part_.local_index(id) * words_;
    uint32_t idx = map_.find(id);
    return idx == IdMap::kEmpty ? nullptr : record(idx);
  }
  // The record index of an owned id, or -1 when a dynamic shard lacks it.
  int64_t find_index(int64_t id) const {
    if (!spec_.dynamic()) return part_.local_index(id);
    uint32_t idx = map_.find(id);
    return idx == IdMap::kEmpty ? -1 : static_cast<int64_t>(idx);
  }
  // Dynamic: creates the absent id's record with weights w (dim floats,
  // which must be its initial value: a lookup computed them) and fresh
  // slots; returns its index.
  int64_t create_with(int64_t id, const float *w) {
    return create_index(id, w);
  }
  // Dynamic: removes the row of id (its slot goes on the free list); false
  // when absent.
  bool erase(int64_t id);
  // Dynamic: the id of the live record at idx.
  int64_t id_at(int64_t idx) const { return ids_[static_cast<size_t>(idx)]; }
  bool live(int64_t idx) const {
    return dead_.empty() || !dead_[static_cast<size_t>(idx)];
  }
  // Per-row state kept beside the records (lifecycle/row_meta.h); told of
  // every record created. Not owned; nullptr: none.
  void set_meta(lifecycle::RowMeta *meta) { meta_ = meta; }
  // The record index of an owned id (static: its dense index; dynamic: its
  // creation index, creating and initializing the record when absent).
  int64_t index(int64_t id) {
    if (!spec_.dynamic()) return part_.local_index(id);
    uint32_t idx = map_.find(id);
    return idx == IdMap::kEmpty ? create_index(id) : idx;
  }
  // The record at index idx < slots(); records idx .. idx + contiguous(idx)
  // - 1 are adjacent in memory (a device table copies them in spans).
  float *record_at(int64_t idx) {
    if (!spec_.dynamic()) return dense_.data() + idx * words_;
    return record(static_cast<uint32_t>(idx));
  }
  int64_t contiguous(int64_t idx) const {
    if (!spec_.dynamic()) return slots() - idx;
    return std::min<int64_t>(chunk_rows_ - idx % chunk_rows_, slots() - idx);
  }
  // Replaces or inserts a whole record (checkpoint load).
  void put(int64_t id, const float *rec);

  // Calls f(id, record) for every row, static rows in index order, dynamic
  // rows in slot order (creation order until a row is erased).
  template <class F>
  void for_each(F &&f) const {
    for_each_indexed([&](int64_t, int64_t id, const float *r) { f(id, r); });
  }
  // The same with each row's record index: f(idx, id, record).
  template <class F>
  void for_each_indexed(F &&f) const {
    if (!spec_.dynamic()) {
      int64_t n = rows();
      for (int64_t i = 0; i < n; ++i)
        f(i, part_.global_id(rank_, i), dense_.data() + i * words_);
    } else {
      for (size_t i = 0; i < ids_.size(); ++i)
        if (dead_.empty() || !dead_[i])
          f(static_cast<int64_t>(i), ids_[i], record(static_cast<uint32_t>(i)));
    }
  }

 private:
  float *record(uint32_t idx) const {
    return chunks_[idx / chunk_rows_].get() + (idx % chunk_rows_) * words_;
  }
  float *create(int64_t id) {
    return record(static_cast<uint32_t>(create_index(id)));
  }
  // w: the initial weights when known, else nullptr (computed).
  int64_t create_index(int64_t id, const float *w = nullptr);

  Spec spec_;
  Optimizer opt_;
  int64_t words_;
  int rank_;
  Partitioner part_;
  uint64_t name_hash_;
  std::vector<float, LineAllocator<float>> dense_;  // static
  IdMap map_;                   // dynamic: id -> creation index
  std::vector<int64_t> ids_;    // dynamic: record index -> id
  std::vector<uint32_t> free_;  // dynamic: erased record slots
  std::vector<uint8_t> dead_;   // dynamic: 1 = free slot (empty: none yet)
  lifecycle::RowMeta *meta_ = nullptr;
  std::vector<std::unique_ptr<float[], LineDelete>> chunks_;
  int64_t chunk_rows_ = 0;
};

}  // namespace emb
}  // namespace hb
