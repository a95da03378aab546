// A sharded table: the collective lookup and gradient steps over an
// Exchange.
//
// lookup: dedup the ids locally (first-occurrence order), check them,
// bucket them by owner, exchange {status, count} headers, then the ids;
// each owner dedups what it received (when more than one rank sent ids),
// gathers the rows (creating dynamic rows on first touch) and sends them
// back in the wire dtype; the caller scatters them to every position.
//
// apply_gradients: the same id route; gradients of local duplicates are
// summed in batch order (the first occurrence, then += each later one),
// rounded to the wire dtype, sent; the owner sums the partial sums of an
// id in rank order (rank 0's first) and applies one optimizer step per
// unique id. This order is the documented contract a reference must follow
// to be bit-equal (docs/embedding-format.md, "Summation order").
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "common/agreement.h"
#include "embedding/id_map.h"
#include "embedding/lifecycle/lifecycle.h"
#include "embedding/lifecycle/row_meta.h"
#include "embedding/plan.h"
#include "embedding/shard.h"
#include "embedding/spec.h"

namespace hb {
namespace emb {

// Counters for benchmarks and tests (this rank's view).
struct Stats {
  uint64_t lookups = 0, applies = 0;
  uint64_t ids = 0;              // ids passed in
  uint64_t unique_ids = 0;       // after the local dedup
  uint64_t owner_unique = 0;     // after the owner dedup
  uint64_t wire_bytes_sent = 0;  // to other ranks: headers, ids, rows, grads
  uint64_t wire_bytes_recv = 0;
  // The traffic this rank causes as a requester: its unique ids to remote
  // owners (lookup and apply), the rows they return, the gradients it
  // sends. Dedup bounds it by unique_ids * (2 * 8 + 2 * wire row bytes).
  uint64_t request_bytes = 0;
};

class Table;

// One table's arguments of encode_rows / apply_received (Table), for a
// batch of them.
struct OwnerCall {
  Table *table = nullptr;
  const int64_t *recv = nullptr;
  size_t nrecv = 0;
  int64_t nu = -1;
  const Dedup *owner = nullptr;
  unsigned char *rows = nullptr;            // encode_rows: the output
  const unsigned char *partials = nullptr;  // apply_received: the input
};

// What Table::batch_with returns: the same results as each call's table
// alone, in fewer round trips.
class OwnerBatch {
 public:
  virtual ~OwnerBatch() = default;
  virtual void encode_rows(const std::vector<OwnerCall> &calls) = 0;
  virtual void apply_received(const std::vector<OwnerCall> &calls) = 0;
};

class Table {
 public:
  // Collective: checks that every rank passed the same config (and that
  // either every rank's table lives on a GPU, spec.device >= 0, or none).
  // `local_check` (may be empty) runs first; what it throws fails the
  // create on every rank.
  // rows: false when the rows live elsewhere (a table on the ps tasks,
  // src/ps, overrides the owner halves below): no shard is allocated.
  Table(const Spec &spec, std::unique_ptr<Exchange> exchange,
        const std::function<void()> &local_check = {}, bool rows = true);
  virtual ~Table() = default;

  const Spec &spec() const { return spec_; }
  Exchange &exchange() { return *x_; }
  Shard &shard() { return *shard_; }
  const Shard &shard() const { return *shard_; }
  // Swaps in a loaded shard; its rows count as written now (RowMeta).
  void replace_shard(std::unique_ptr<Shard> s);
  const Stats &stats() const { return stats_; }
  void reset_stats() { stats_ = Stats(); }

  // The signature of this rank's next collective call on the table (the
  // first agreement of the call checks it across ranks).
  CallSig call(CallOp op) {
    return CallSig{op, id_, calls_, &calls_, &spec_.name};
  }

  void lookup(const int64_t *ids, size_t n, float *out);
  void apply_gradients(const int64_t *ids, size_t n, const float *grads);

  // The owner halves of a step, shared with collections (collection.h).
  // recv: the nrecv ids received, packed by source rank; nu: the result of
  // StepPlan::owner_dedup on them (-1: already unique) and owner its dedup.
  // encode_rows writes their rows in the wire dtype (nrecv x wire_row_bytes,
  // dynamic rows created on first touch); apply_received sums the partial
  // sums (wire dtype, received order) of each id in rank order and makes
  // one optimizer step per unique id.
  virtual void encode_rows(const int64_t *recv, size_t nrecv, int64_t nu,
                           const Dedup &owner, unsigned char *dst);
  virtual void apply_received(const int64_t *recv, size_t nrecv, int64_t nu,
                              const Dedup &owner,
                              const unsigned char *partials);
  // encode_rows in pieces, for a caller that writes each source rank's
  // rows elsewhere (a collection's, straight into the exchange's blocks):
  // find_rows finds (and creates) the rows of recv once; encode_found then
  // writes those of recv[from, from + n) at dst, the bytes encode_rows
  // writes there. Only for a table that holds its rows (holds_rows():
  // encode_rows not overridden); valid until the next owner call.
  bool holds_rows() const { return shard_ != nullptr; }
  void find_rows(const int64_t *recv, size_t nrecv, int64_t nu,
                 const Dedup &owner);
  void encode_found(size_t from, size_t n, unsigned char *dst) const;
  // apply_received of float32 partial sums already laid out as rows
  // (nrecv x dim, received order): a world-1 collection's own, which skip
  // the wire buffer and its copy.
  virtual void apply_rows(const int64_t *recv, size_t nrecv, int64_t nu,
                          const Dedup &owner, const float *partials);
  size_t wire_row_bytes() const { return wire_row_bytes_; }
  // The records a lookup may read in place instead of through
  // encode_rows: a static shard's dense records (dense_records()) when
  // this rank holds the rows and no lifecycle reads them (its lookups
  // create nothing and read no defaults); nullptr otherwise. A subclass
  // that overrides encode_rows holds no shard (rows = false).
  const float *records_in_place() const {
    return shard_ && !life_ ? shard_->dense_records() : nullptr;
  }

  // The owner halves of several tables at once (a collection's), where the
  // tables can make them together: tables on the ps tasks send one request
  // per ps task for all of them. nullptr (the default): each table its own.
  virtual std::unique_ptr<OwnerBatch> batch_with(
      const std::vector<Table *> &all);

  // Per-row write stamps and the evicted-id log (lifecycle/row_meta.h):
  // nullptr until track_writes() and for tables without a lifecycle.
  lifecycle::RowMeta *row_meta() { return meta_.get(); }
  const lifecycle::RowMeta *row_meta() const { return meta_.get(); }
  // Turns on write stamps (from the current epoch: rows written before
  // keep stamp 0) and the evicted-id log. Call on every rank at the same
  // point of the table's call sequence (e.g. inside a collective export).
  lifecycle::RowMeta &track_writes();
  // Admission and eviction (spec().life): nullptr without a lifecycle.
  lifecycle::Lifecycle *life() { return life_.get(); }
  const lifecycle::Lifecycle *life() const { return life_.get(); }

 private:
  // Header + id exchange after plan_.prepare; fills recv_ids_.
  void route_ids(Outcome &o, const char *what);
  // The owner dedup of recv_ids_ (StepPlan::owner_dedup), counted.
  int64_t owner_dedup();
  void exchange_payload(const void *send, const std::vector<int64_t> &scount,
                        void *recv, const std::vector<int64_t> &rcount,
                        size_t elem_bytes);
  void count_step(size_t n);
  // One optimizer step for each of n unique owned ids with summed
  // gradients g (n x dim).
  void step_rows(const int64_t *ids, size_t n, const float *g);

  Spec spec_;
  std::unique_ptr<Exchange> x_;
  std::unique_ptr<Shard> shard_;
  std::unique_ptr<lifecycle::RowMeta> meta_;    // see row_meta()
  std::unique_ptr<lifecycle::Lifecycle> life_;  // uses meta_
  int rank_, world_;
  size_t wire_row_bytes_;
  Stats stats_;
  StepPlan plan_;
  int64_t id_ = 0;     // spec fingerprint (and host/GPU placement)
  int64_t calls_ = 0;  // matched collective calls since create

  // Reused per-call buffers.
  std::vector<int64_t> recv_ids_;
  std::vector<float> fbuf_, fbuf2_, fdefault_;
  std::vector<unsigned char> wbuf_, wbuf2_;
  std::vector<const float *> rows_;  // find_rows'
  const uint32_t *found_inv_ = nullptr;
};

}  // namespace emb
}  // namespace hb
