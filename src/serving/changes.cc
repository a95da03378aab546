#include "serving/changes.h"

#include <algorithm>

namespace hb {
namespace serving {

uint64_t seal_writes(emb::Table &t) { return t.track_writes().seal(); }

uint64_t oldest_delta_base(const emb::Table &t) {
  return t.row_meta() ? t.row_meta()->complete_since() : 0;
}

void rows_changed_since(const emb::Table &t, uint64_t since,
                        const std::function<void(int64_t, const float *)> &f) {
  const lifecycle::RowMeta *meta = t.row_meta();  // set by seal_writes
  t.shard().for_each_indexed([&](int64_t idx, int64_t id, const float *rec) {
    if (meta->stamp(idx) > since) f(id, rec);
  });
}

std::vector<int64_t> evicted_since(const emb::Table &t, uint64_t since) {
  std::vector<int64_t> ids;
  const auto &log = t.row_meta()->evicted();
  // Stamps never decrease along the log: scan back to `since`.
  for (auto it = log.rbegin(); it != log.rend() && it->stamp > since; ++it)
    if (t.shard().find_index(it->id) < 0) ids.push_back(it->id);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

void retain_evictions_since(emb::Table &t, uint64_t since) {
  if (t.row_meta()) t.row_meta()->trim_evicted(since);
}

}  // namespace serving
}  // namespace hb
