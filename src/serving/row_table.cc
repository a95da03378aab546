#include "serving/row_table.h"

#include <algorithm>
#include <utility>

namespace hb {
namespace serving {

RowTable::RowTable(int64_t dim, size_t expected)
    : dim_(dim), row_bytes_(4 * static_cast<size_t>(dim)) {
  rebuild(expected);
}

void RowTable::rebuild(size_t expected) {
  RowTable old(std::move(*this));
  cap_ = std::max<size_t>(16, static_cast<size_t>(expected / kMinLoad) + 1);
  size_ = 0;
  has_free_key_ = false;
  keys_.assign(cap_, kFree);
  rows_.assign((cap_ + 1) * dim_, 0.0f);
  if (old.cap_) old.for_each([&](int64_t id, const float *r) { put(id, r); });
}

bool RowTable::put(int64_t id, const float *r) {
  if (id == kFree) {
    const bool fresh = !has_free_key_;
    has_free_key_ = true;
    size_ += fresh;
    std::memcpy(row(cap_), r, row_bytes_);
    return fresh;
  }
  if (static_cast<double>(size_ + 1) > kMaxLoad * cap_) rebuild(size_ + 1);
  for (size_t s = home(id);;) {
    if (keys_[s] == id) {
      std::memcpy(row(s), r, row_bytes_);
      return false;
    }
    if (keys_[s] == kFree) {
      keys_[s] = id;
      std::memcpy(row(s), r, row_bytes_);
      ++size_;
      return true;
    }
    if (++s == cap_) s = 0;
  }
}

bool RowTable::erase(int64_t id) {
  if (id == kFree) {
    const bool had = has_free_key_;
    has_free_key_ = false;
    size_ -= had;
    return had;
  }
  size_t hole = home(id);
  for (;;) {
    if (keys_[hole] == kFree) return false;
    if (keys_[hole] == id) break;
    if (++hole == cap_) hole = 0;
  }
  // Backward-shift deletion: an entry after the hole moves into it unless
  // its home lies cyclically in (hole, j], so probe chains stay intact
  // without tombstones.
  for (size_t j = hole;;) {
    if (++j == cap_) j = 0;
    if (keys_[j] == kFree) break;
    const size_t h = home(keys_[j]);
    const bool stays = hole <= j ? (h > hole && h <= j) : (h > hole || h <= j);
    if (stays) continue;
    keys_[hole] = keys_[j];
    std::memcpy(row(hole), row(j), row_bytes_);
    hole = j;
  }
  keys_[hole] = kFree;
  --size_;
  return true;
}

}  // namespace serving
}  // namespace hb
