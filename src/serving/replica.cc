#include "serving/replica.h"

#include <cstring>

#include "abi/error.h"

namespace hb {
namespace serving {

Replica::Replica(const ExportImage &full)
    : name_(full.name),
      dim_(full.dim),
      version_(full.version),
      lineage_(full.lineage),
      map_(full.ids.size()),
      rows_(full.rows),
      slot_ids_(full.ids) {
  for (size_t i = 0; i < full.ids.size(); ++i) {
    bool inserted;
    map_.insert(full.ids[i], static_cast<uint32_t>(i), &inserted);
    if (!inserted)  // format 2 checks order while decoding; format 1 here
      fail(HB_ERR_CORRUPT, "export of '%s': id %lld appears twice",
           name_.c_str(), (long long)full.ids[i]);
  }
}

uint64_t Replica::lookup(const int64_t *ids, size_t n, float *out) const {
  uint64_t miss = 0;
  const size_t bytes = 4 * static_cast<size_t>(dim_);
  for (size_t i = 0; i < n; ++i) {
    uint32_t s = map_.find(ids[i]);
    float *o = out + i * dim_;
    if (s == emb::IdMap::kEmpty) {
      std::memset(o, 0, bytes);
      ++miss;
    } else {
      std::memcpy(o, row(s), bytes);
    }
  }
  return miss;
}

int64_t Replica::rows_after(const ExportImage &d) const {
  int64_t n = rows();
  for (int64_t id : d.evicted) n -= map_.find(id) != emb::IdMap::kEmpty;
  for (int64_t id : d.ids) n += map_.find(id) == emb::IdMap::kEmpty;
  return n;
}

void Replica::apply(const ExportImage &d) {
  for (int64_t id : d.evicted) {
    uint32_t s = map_.erase(id);
    if (s != emb::IdMap::kEmpty) free_.push_back(s);
  }
  const size_t bytes = 4 * static_cast<size_t>(dim_);
  for (size_t i = 0; i < d.ids.size(); ++i) {
    uint32_t s = map_.find(d.ids[i]);
    if (s == emb::IdMap::kEmpty) {
      if (!free_.empty()) {
        s = free_.back();
        free_.pop_back();
        slot_ids_[s] = d.ids[i];
      } else {
        s = static_cast<uint32_t>(slot_ids_.size());
        slot_ids_.push_back(d.ids[i]);
        rows_.resize(rows_.size() + dim_);
      }
      bool inserted;
      map_.insert(d.ids[i], s, &inserted);
    }
    std::memcpy(rows_.data() + s * dim_, d.rows.data() + i * dim_, bytes);
  }
  version_ = d.version;
}

}  // namespace serving
}  // namespace hb
