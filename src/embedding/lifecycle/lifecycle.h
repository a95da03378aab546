// A table's lifecycle (hb_embedding_lifecycle, docs/table-lifecycle.md):
// the owner side of admission and eviction, called from the table's owner
// halves (embedding/table.cc: encode_rows, apply_received), which single-
// table calls and collections share.
//
// - lookup_row: a lookup never creates a row; an id without one reads its
//   initial value (admission off: the value its row will start from) or
//   the default value (not admitted yet).
// - apply: one update step. The step counter advances (same on every
//   rank); rows present get their optimizer step; ids without a row are
//   counted (all of them first), then those admitted get a fresh row and
//   the step's gradient, the others' gradients are dropped. Every
//   evict_interval steps a boundary runs (eviction.cc), collectively.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "embedding/id_map.h"
#include "embedding/lifecycle/admission.h"
#include "embedding/lifecycle/policy.h"
#include "embedding/lifecycle/row_meta.h"

namespace hb {
class Exchange;
namespace emb {
class Shard;
struct Spec;
}  // namespace emb
namespace lifecycle {

struct Stats {
  uint64_t admitted = 0, dropped = 0;
  uint64_t evicted_ttl = 0, evicted_l2 = 0, evicted_capacity = 0;
  uint64_t boundaries = 0, selection_rounds = 0;
  double boundary_seconds = 0;
};

class Lifecycle {
 public:
  Lifecycle(const emb::Spec &spec, int world, RowMeta &meta);

  const Policy &policy() const { return p_; }
  Admission &admission() { return adm_; }
  const Admission &admission() const { return adm_; }
  const Stats &stats() const { return stats_; }

  // The row a lookup of owned id reads: its record, or `scratch` (dim
  // floats) filled with what an id without a row reads. Call
  // begin_lookup() first in each lookup.
  void begin_lookup();
  const float *lookup_row(const emb::Shard &s, int64_t id, float *scratch);
  // One update step over the owner's n unique ids and their summed
  // gradients g (n x dim). Collective when it ends at a boundary.
  void apply(emb::Shard &s, Exchange &x, const int64_t *ids, size_t n,
             const float *g);

  // After a load: the wall-clock history restarts (ttl_seconds): the
  // rows loaded count as updated at the load.
  void on_load();

 private:
  // eviction.cc
  void boundary(emb::Shard &s, Exchange &x);
  uint64_t time_cutoff(Exchange &x);
  void evict_capacity(emb::Shard &s, Exchange &x, int64_t excess,
                      std::vector<int64_t> &victims);

  Policy p_;
  int64_t dim_;
  uint64_t name_hash_;
  const emb::Spec &spec_;
  RowMeta &meta_;
  Admission adm_;
  Stats stats_;
  std::vector<size_t> fresh_;  // per-step scratch: ids without a row
  // Admission off: the initial rows the last lookup computed for ids
  // without a row (id -> index in init_rows_), so the step that creates
  // them copies instead of computing them again.
  emb::IdMap init_of_;
  std::vector<float> init_rows_;
  // ttl_seconds: (update step, time) of recent steps, oldest first.
  std::deque<std::pair<uint64_t, std::chrono::steady_clock::time_point>> times_;
};

}  // namespace lifecycle
}  // namespace hb
