#include "embedding/lifecycle/row_meta.h"

#include <algorithm>

namespace hb {
namespace lifecycle {

RowMeta::RowMeta(int64_t slots, bool lifecycle) : lifecycle_(lifecycle) {
  grow(static_cast<size_t>(slots));
}

void RowMeta::grow(size_t n) {
  // Amortized doubling, like the shard's id vector beside it.
  size_t cap = std::max(n, stamp_.size() + stamp_.size() / 2);
  stamp_.resize(cap, 0);
  if (lifecycle_) {
    last_step_.resize(cap, 0);
    updates_.resize(cap, 0);
  }
}

void RowMeta::on_load(int64_t slots) {
  stamp_.assign(static_cast<size_t>(slots), epoch_);
  if (lifecycle_) {
    last_step_.assign(static_cast<size_t>(slots), step_);
    updates_.assign(static_cast<size_t>(slots), 0);
  }
  log_.clear();
  complete_since_ = epoch_;
}

size_t RowMeta::memory_bytes() const {
  return stamp_.capacity() * 8 + last_step_.capacity() * 8 +
         updates_.capacity() * 4 + log_.size() * sizeof(EvictedId);
}

}  // namespace lifecycle
}  // namespace hb
