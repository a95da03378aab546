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
      table_(full.dim, full.ids.size()) {
  for (size_t i = 0; i < full.ids.size(); ++i)
    if (!table_.put(full.ids[i], full.rows.data() + i * dim_))
      // format 2 checks order while decoding; format 1 here
      fail(HB_ERR_CORRUPT, "export of '%s': id %lld appears twice",
           name_.c_str(), (long long)full.ids[i]);
}

uint64_t Replica::lookup(const int64_t *ids, size_t n, float *out) const {
  // A batch overlaps its ids' memory reads: ask for the rows a few ids
  // ahead (a single id needs no hint: find() reads key and row at once).
  constexpr size_t kAhead = 8;
  uint64_t miss = 0;
  const size_t bytes = 4 * static_cast<size_t>(dim_);
  for (size_t i = 0; i < n; ++i) {
    if (i + kAhead < n) table_.prefetch(ids[i + kAhead]);
    const float *r = table_.find(ids[i]);
    float *o = out + i * dim_;
    if (!r) {
      std::memset(o, 0, bytes);
      ++miss;
    } else {
      std::memcpy(o, r, bytes);
    }
  }
  return miss;
}

int64_t Replica::rows_after(const ExportImage &d) const {
  int64_t n = rows();
  for (int64_t id : d.evicted) n -= table_.find(id) != nullptr;
  for (int64_t id : d.ids) n += table_.find(id) == nullptr;
  return n;
}

void Replica::apply(const ExportImage &d) {
  for (int64_t id : d.evicted) table_.erase(id);
  for (size_t i = 0; i < d.ids.size(); ++i)
    table_.put(d.ids[i], d.rows.data() + i * dim_);
  version_ = d.version;
}

}  // namespace serving
}  // namespace hb
