#include "embedding/lifecycle/checkpoint_state.h"

#include "common/bytes.h"
#include "common/file_io.h"
#include "common/log.h"
#include "embedding/table.h"

namespace hb {
namespace lifecycle {

std::string encode_state(const emb::Shard &s, const RowMeta &m,
                         const Admission &a) {
  std::string out;
  auto put = [&out](const void *p, size_t n) {
    out.append(static_cast<const char *>(p), n);
  };
  uint64_t step = m.step();
  put(&step, 8);
  const uint32_t zero = 0;
  s.for_each_indexed([&](int64_t idx, int64_t, const float *) {
    uint64_t last = m.last_step(idx);
    uint32_t upd = m.updates(idx);
    put(&last, 8);
    put(&upd, 4);
    put(&zero, 4);
  });
  int64_t n = a.pending();
  put(&n, 8);
  a.for_each_counter([&](const Admission::Counter &c) {
    put(&c.id, 8);
    put(&c.count, 4);
    put(&zero, 4);
    put(&c.last_seen, 8);
  });
  int64_t nb = static_cast<int64_t>(a.cells().size());
  put(&nb, 8);
  put(a.cells().data(), a.cells().size());
  static const char pad[8] = {0};
  put(pad, (8 - nb % 8) % 8);
  return out;
}

void read_state(ByteReader &rd, const std::vector<int64_t> &file_ids,
                const std::function<bool(int64_t)> &owned, bool keep_bloom,
                LoadedState *out) {
  out->present = true;
  out->step = rd.get<uint64_t>("lifecycle step");
  for (int64_t id : file_ids) {
    uint64_t last = rd.get<uint64_t>("row last step");
    uint32_t upd = rd.get<uint32_t>("row updates");
    rd.get<uint32_t>("row reserved");
    if (last > out->step)
      fail(HB_ERR_CORRUPT, "%s: row %lld last updated at step %llu > step %llu",
           rd.what().c_str(), (long long)id, (unsigned long long)last,
           (unsigned long long)out->step);
    if (owned(id)) out->rows.push_back(LoadedState::Row{id, last, upd});
  }
  int64_t n = rd.get<int64_t>("counters");
  if (n < 0 || static_cast<uint64_t>(n) > rd.left() / 24)
    fail(HB_ERR_CORRUPT, "%s: %lld admission counters at byte %zu",
         rd.what().c_str(), (long long)n, rd.pos() - 8);
  for (int64_t i = 0; i < n; ++i) {
    Admission::Counter c;
    c.id = rd.get<int64_t>("counter id");
    c.count = rd.get<uint32_t>("counter count");
    rd.get<uint32_t>("counter reserved");
    c.last_seen = rd.get<uint64_t>("counter last seen");
    if (owned(c.id)) out->counters.push_back(c);
  }
  int64_t nb = rd.get<int64_t>("bloom bytes");
  if (nb < 0 || static_cast<uint64_t>(nb) > rd.left())
    fail(HB_ERR_CORRUPT, "%s: %lld Bloom bytes at byte %zu", rd.what().c_str(),
         (long long)nb, rd.pos() - 8);
  const char *cells = rd.take(static_cast<size_t>(nb), "bloom cells");
  rd.take((8 - nb % 8) % 8, "bloom padding");
  if (keep_bloom) {
    out->bloom.assign(cells, cells + nb);
    out->bloom_present = true;
  }
}

void restore_state(emb::Table &t, const LoadedState &st) {
  Lifecycle *life = t.life();
  RowMeta *m = t.row_meta();
  if (!life || !m) return;
  emb::Shard &s = t.shard();
  m->set_step(st.present ? st.step : 0);
  m->on_load(s.slots());  // every row: last updated now, no updates
  for (const LoadedState::Row &r : st.rows) {
    int64_t idx = s.find_index(r.id);
    if (idx >= 0) m->set_lifecycle(idx, r.last_step, r.updates);
  }
  Admission &a = life->admission();
  a.clear();
  for (const Admission::Counter &c : st.counters) a.restore(c);
  a.restored();
  if (!a.cells().empty()) {
    if (st.bloom_present && st.bloom.size() == a.cells().size()) {
      a.cells() = st.bloom;
    } else if (st.present) {
      HB_LOG_WARN(
          "hb_embedding_load('%s'): the admission Bloom filter was saved at "
          "another world size or size; it starts empty (admitted rows are "
          "kept, pending counts are lost)",
          t.spec().name.c_str());
    }
  }
}

}  // namespace lifecycle
}  // namespace hb
