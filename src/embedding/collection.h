// An embedding collection: the features of a model over several sharded
// tables, looked up and updated in one collective step
// (docs/embedding-collections.md).
//
// lookup: per table, the ids of its features are concatenated (feature
// order) and planned by the table's StepPlan (dedup, range check, bucketing
// by owner); then three exchanges for all tables together: one header per
// peer {status, detail, fingerprint, count per table}, the ids (per peer,
// table after table), the rows back. The owner halves are the tables' own
// (Table::encode_rows / apply_received).
//
// apply_gradients: when the ids equal the last lookup's on this rank, the
// step speculatively reuses that plan: one exchange of {header, partial
// sums}. The header carries each rank's verdict, so the ranks decide
// together: if any rank's ids differed, every rank plans again (header, ids,
// partial sums). A stale plan is never used.
#pragma once

// The collection API is in hb.h's EXPERIMENTAL section; a translation unit
// that includes this header must see it (include this header first).
#ifndef HB_EXPERIMENTAL
#define HB_EXPERIMENTAL 1
#endif

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "embedding/exchange.h"
#include "embedding/plan.h"
#include "embedding/table.h"

namespace hb {
namespace emb {

struct Feature {
  std::string name;
  Table *table = nullptr;
  int32_t pooling = HB_POOLING_SUM;
};

// One rank's batch, as the C API passes it (hb_jagged_batch).
struct JaggedBatch {
  int64_t batch = 0;
  const int64_t *const *ids = nullptr;
  const int64_t *const *offsets = nullptr;
  const int64_t *const *lengths = nullptr;
  const float *const *weights = nullptr;
};

struct CollectionStats {
  uint64_t lookups = 0, updates = 0, reused_plans = 0, rounds = 0;
  uint64_t ids = 0, unique_ids = 0, owner_unique = 0;
  uint64_t wire_bytes_sent = 0, wire_bytes_recv = 0, dedup_bound_bytes = 0;
};

class Collection {
 public:
  // Collective: checks that every rank passed the same features.
  Collection(std::vector<Feature> features, std::unique_ptr<Exchange> x);

  size_t num_features() const { return features_.size(); }
  int64_t pooled_width() const { return pooled_width_; }
  int64_t column(size_t f) const { return column_[f]; }
  int64_t dim(size_t f) const { return features_[f].table->spec().dim; }
  const CollectionStats &stats() const { return stats_; }
  void reset_stats() { stats_ = CollectionStats(); }

  void lookup(const JaggedBatch &in, float *out, float *const *unpooled);
  void apply_gradients(const JaggedBatch &in, const float *grad_out,
                       const float *const *grad_unpooled);

 private:
  // A feature's bags in this call: ids[0, n), bag b = [bag[b], bag[b+1]).
  struct Bags {
    const int64_t *ids = nullptr;
    const float *w = nullptr;
    size_t n = 0;
    std::vector<int64_t> bag;
  };
  // The distinct tables, each with its plan and per-call buffers.
  struct Slot {
    Table *table;
    std::vector<size_t> features;  // feature indices on this table, in order
    StepPlan plan;
    std::vector<int64_t> ids;         // concatenated ids of its features
    std::vector<int64_t> recv_ids;    // packed by source rank
    int64_t owner_nu = -1;            // StepPlan::owner_dedup's result
    std::vector<float> rows;          // unique rows (lookup) / per-id grads
    std::vector<float> partial;       // partial sums in send order
    std::vector<unsigned char> wire;  // owner side, received order
    Slot(Table *t, int rank, int world)
        : table(t), plan(t->spec(), rank, world) {}
  };

  // Reads and checks a batch into bags_ and start_, and that the outputs
  // (or gradients) it needs are there: `pooled` (B x pooled_width) and
  // rows[f] for the pooling-NONE features with ids.
  void read_batch(const JaggedBatch &in, const char *what, const void *pooled,
                  const void *const *rows, const char *pooled_name,
                  const char *rows_name);
  // Plans every table on the ids in bags_ and exchanges header and ids;
  // op: what the fingerprint says (lookup or update).
  void plan_and_route(Outcome &o, int op, const char *what);
  // Layout of a payload [peer][header, table 0, table 1, ...] with
  // `per_id[t]` bytes per id of table t, for the ids this rank sends
  // (sent: plan send_counts) or receives (recv_counts): bytes per peer,
  // at[p * (T + 1)] = peer p's block, at[p * (T + 1) + 1 + t] = its table t;
  // buf sized to the whole payload.
  void layout(size_t header, const std::vector<size_t> &per_id, bool sent,
              std::vector<int64_t> *bytes, std::vector<int64_t> *at,
              std::vector<unsigned char> *buf) const;
  // Both layouts of one exchange (sb_/sat_/sbuf_, rb_/rat_/rbuf_): out
  // along the plans (requesters to owners), or back.
  void layouts(size_t header, const std::vector<size_t> &per_id, bool back);
  void exchange(const void *send, const std::vector<int64_t> &sb, void *recv,
                const std::vector<int64_t> &rb);
  uint64_t fingerprint(int op) const;
  // The per-id gradients of table slot s into s.rows (its ids' order).
  void expand_grads(Slot &s, const float *grad_out,
                    const float *const *grad_unpooled);
  // Sends the partial sums (with a verdict header) and, when every rank's
  // verdict is OK, applies them; returns false when some rank could not
  // reuse (nothing applied).
  bool send_partials(Outcome &o, bool reuse, const char *what);

  std::vector<Feature> features_;
  std::unique_ptr<Exchange> x_;
  int rank_, world_;
  uint64_t id_;
  uint64_t seq_ = 0;  // calls so far: part of every fingerprint
  std::vector<int64_t> column_;
  int64_t pooled_width_ = 0;
  std::vector<Slot> slots_;
  std::vector<size_t> slot_of_;    // feature -> slot
  std::vector<size_t> start_;      // feature -> first index in its slot's ids
  std::vector<size_t> row_bytes_;  // slot -> wire row bytes
  std::vector<Bags> bags_;
  bool plan_valid_ = false;  // the last call was a successful lookup
  CollectionStats stats_;

  std::vector<int64_t> sb_, rb_, sat_, rat_;  // payload layouts
  std::vector<unsigned char> sbuf_, rbuf_;
};

}  // namespace emb
}  // namespace hb
