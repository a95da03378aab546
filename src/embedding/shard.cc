#include "embedding/shard.h"

#include <sys/mman.h>

#include <cstring>

#include "abi/error.h"
#include "embedding/init.h"

namespace hb {
namespace emb {

Partitioner::Partitioner(const Spec &s, int world_size)
    : world(world_size), kind(s.partition), num_rows(s.num_rows) {
  if (kind == HB_PARTITION_DIV) block = (num_rows + world - 1) / world;
  shift = world > 0 && (world & (world - 1)) == 0 ? __builtin_ctz(world) : -1;
}

int64_t Partitioner::local_rows(int rank) const {
  if (kind == HB_PARTITION_DIV) {
    int64_t begin = std::min<int64_t>(rank * block, num_rows);
    return std::min<int64_t>(begin + block, num_rows) - begin;
  }
  return rank < num_rows ? (num_rows - rank + world - 1) / world : 0;
}

namespace {

// Asks for transparent huge pages (where the kernel offers them on advice)
// on the 2 MiB-aligned middle of a block not touched yet: an optimizer step
// or a lookup reads random rows of a table of tens of MB, and with 4 KiB
// pages each row is also a TLB miss and a page walk.
void advise_huge_pages(void *p, size_t bytes) {
#ifdef MADV_HUGEPAGE
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uintptr_t lo = (a + kHuge - 1) & ~(kHuge - 1),
                  hi = (a + bytes) & ~(kHuge - 1);
  if (hi > lo) ::madvise(reinterpret_cast<void *>(lo), hi - lo, MADV_HUGEPAGE);
#else
  (void)p, (void)bytes;
#endif
}

}  // namespace

Shard::Shard(const Spec &spec, int rank, int world)
    : spec_(spec),
      opt_(spec),
      words_(opt_.record_words()),
      rank_(rank),
      part_(spec, world),
      name_hash_(fnv1a64(spec.name.data(), spec.name.size())) {
  if (!spec_.dynamic()) {
    int64_t n = part_.local_rows(rank);
    try {
      // Allocated, advised, then touched (the zero fill).
      dense_.reserve(static_cast<size_t>(n * words_));
      advise_huge_pages(dense_.data(), static_cast<size_t>(n * words_) * 4);
      dense_.resize(static_cast<size_t>(n * words_));
    } catch (const std::bad_alloc &) {
      fail(HB_ERR_OUT_OF_MEMORY,
           "embedding '%s': cannot allocate %lld rows of %lld bytes on rank %d",
           spec.name.c_str(), (long long)n, (long long)words_ * 4, rank);
    }
    for (int64_t i = 0; i < n; ++i) {
      float *r = dense_.data() + i * words_;
      init_row(spec_, name_hash_, part_.global_id(rank, i), r);
      opt_.init_slots(r);
    }
  } else {
    // About 1 MiB per chunk, at least 64 rows.
    chunk_rows_ = std::max<int64_t>(64, (1 << 20) / (words_ * 4));
  }
}

int64_t Shard::rows() const {
  return spec_.dynamic() ? static_cast<int64_t>(ids_.size() - free_.size())
                         : static_cast<int64_t>(dense_.size()) / words_;
}

int64_t Shard::slots() const {
  return spec_.dynamic() ? static_cast<int64_t>(ids_.size())
                         : static_cast<int64_t>(dense_.size()) / words_;
}

size_t Shard::memory_bytes() const {
  if (!spec_.dynamic()) return dense_.size() * 4;
  return chunks_.size() * chunk_rows_ * words_ * 4 + map_.memory_bytes() +
         ids_.capacity() * 8 + free_.capacity() * 4 + dead_.capacity();
}

bool Shard::erase(int64_t id) {
  uint32_t idx = map_.erase(id);
  if (idx == IdMap::kEmpty) return false;
  if (dead_.empty()) dead_.resize(ids_.capacity());
  if (dead_.size() < ids_.size()) dead_.resize(ids_.capacity());
  dead_[idx] = 1;
  free_.push_back(idx);
  return true;
}

int64_t Shard::create_index(int64_t id, const float *w) {
  size_t idx;
  if (!free_.empty()) {
    // The most recently freed slot: its memory is the warmest.
    idx = free_.back();
    free_.pop_back();
    dead_[idx] = 0;
    ids_[idx] = id;
  } else {
    idx = ids_.size();
    if (idx >= IdMap::kEmpty)
      fail(HB_ERR_OUT_OF_MEMORY, "embedding '%s': shard %d is full (%zu rows)",
           spec_.name.c_str(), rank_, idx);
    if (idx % chunk_rows_ == 0)
      chunks_.emplace_back(static_cast<float *>(
          ::operator new[](static_cast<size_t>(chunk_rows_ * words_) * 4,
                           std::align_val_t(kRecordAlign))));
    ids_.push_back(id);
    if (!dead_.empty() && dead_.size() < ids_.size())
      dead_.resize(ids_.capacity());
  }
  bool inserted;
  map_.insert(id, static_cast<uint32_t>(idx), &inserted);
  float *r = record(static_cast<uint32_t>(idx));
  if (w)
    std::memcpy(r, w, static_cast<size_t>(spec_.dim) * 4);
  else
    init_row(spec_, name_hash_, id, r);
  opt_.init_slots(r);
  if (meta_) meta_->on_create(static_cast<int64_t>(idx));
  return static_cast<int64_t>(idx);
}

void Shard::put(int64_t id, const float *rec) {
  std::memcpy(get(id), rec, static_cast<size_t>(words_) * 4);
}

}  // namespace emb
}  // namespace hb
