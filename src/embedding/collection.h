// An embedding collection: the features of a model over several sharded
// tables, looked up and updated in one collective step
// (docs/embedding-collections.md). Host tables here; GPU tables in
// device_collection.h, over the same step.
//
// lookup: per table, the ids of its features are concatenated (feature
// order) and planned by the table's StepPlan (dedup, range check, bucketing
// by owner); then three exchanges for all tables together: one header per
// peer {status, detail, fingerprint, count per table}, the ids (per peer,
// table after table), the rows back. Where the exchange learns receive
// sizes from the round itself (the call board), each peer's header rides
// at the front of its ids: two exchanges. The owner halves are the
// tables' own (Table::encode_rows / apply_received).
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
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/agreement.h"
#include "embedding/plan.h"
#include "embedding/table.h"
#include "timeline/timeline.h"

namespace hb {
namespace emb {

// The allocator of the step's buffers: resize leaves new elements
// uninitialized. Each is written in full before it is read, and they
// change size from phase to phase (ids, rows, partial sums), so the zero
// fill of a plain vector cost a pass over the rows per step.
template <class T>
struct NoFill : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = NoFill<U>;
  };
  NoFill() = default;
  template <class U>
  NoFill(const NoFill<U> &) {}
  template <class U>
  void construct(U *p) noexcept {
    ::new (static_cast<void *>(p)) U;
  }
  template <class U, class... A>
  void construct(U *p, A &&...a) {
    ::new (static_cast<void *>(p)) U(std::forward<A>(a)...);
  }
};

class DeviceTable;

struct Feature {
  std::string name;
  Table *table = nullptr;
  int32_t pooling = HB_POOLING_SUM;
  // The table's rows on a GPU (its DeviceTable), for a device collection.
  DeviceTable *device = nullptr;
};

// One rank's batch, as the C API passes it (hb_jagged_batch).
struct JaggedBatch {
  int64_t batch = 0;
  const int64_t *const *ids = nullptr;
  const int64_t *const *offsets = nullptr;
  const int64_t *const *lengths = nullptr;
  const float *const *weights = nullptr;
  // Non-empty: the caller's hb_jagged_batch itself was bad (NULL, a
  // struct_size too small). The call still runs its header round so that
  // every rank fails with HB_ERR_INVALID_ARGUMENT naming this one.
  std::string error;
};

// A dense float32 buffer summed across ranks inside a gradient step's
// partial-sums round (hb_collection_apply_gradients_dense): recv = the sum
// over ranks of send, in rank order per element (hb_allreduce's order).
// recv may equal send; count 0: nothing. error: the caller's
// hb_collection_dense itself was bad (reported in the step's round).
struct DenseSum {
  const float *send = nullptr;
  float *recv = nullptr;
  size_t count = 0;
  std::string error;
};

struct CollectionStats {
  uint64_t lookups = 0, updates = 0, reused_plans = 0, rounds = 0;
  uint64_t ids = 0, unique_ids = 0, owner_unique = 0;
  uint64_t wire_bytes_sent = 0, wire_bytes_recv = 0, dedup_bound_bytes = 0;
};

// The step every collection runs -- argument checks, the header round, plan
// reuse and its verdicts, the payload layouts -- over hooks that keep the
// data where the tables are: Collection (host tables, host buffers) and
// DeviceCollection (GPU tables, device buffers; device_collection.h). Both
// cost the same rounds.
class CollectionBase {
 public:
  virtual ~CollectionBase() = default;

  size_t num_features() const { return features_.size(); }
  int64_t pooled_width() const { return pooled_width_; }
  int64_t column(size_t f) const { return column_[f]; }
  int64_t dim(size_t f) const { return features_[f].table->spec().dim; }
  const CollectionStats &stats() const { return stats_; }
  void reset_stats() { stats_ = CollectionStats(); }

  void lookup(const JaggedBatch &in, float *out, float *const *unpooled);
  // dense (NULL from hb_collection_apply_gradients, never NULL from
  // hb_collection_apply_gradients_dense): summed across ranks in the
  // partial-sums round that applies the step.
  void apply_gradients(const JaggedBatch &in, const float *grad_out,
                       const float *const *grad_unpooled,
                       const DenseSum *dense = nullptr);
  // The pipelined lookup (hb_collection_lookup_start / _wait): start plans
  // the batch and sends its ids to their owners (header and ids rounds)
  // into a second set of per-call state, so the plan of the lookup before
  // it stays in place for that lookup's apply_gradients; wait swaps the
  // started state in and runs the rows round, so the owners read the rows
  // after every update made before the wait.
  void lookup_start(const JaggedBatch &in, float *out, float *const *unpooled);
  void lookup_wait();
  bool pending() const { return pending_; }
  // Waits (bounded) for a start's rounds posted to the exchange's progress
  // thread (Exchange::post): every call but the start's own settles first,
  // so the caller's thread and the job never touch the collection at once.
  void settle();

 protected:
  // Collective: checks that every rank passed the same features. device:
  // every feature's table lives on a GPU (Feature::device, one device);
  // otherwise none may.
  CollectionBase(std::vector<Feature> features, std::unique_ptr<Exchange> x,
                 bool device);

  // ---- Hooks of one call (the batch's data stays where the tables are).
  // Reads feature f's bags into n_[f] and base_[f] (its first id's index in
  // ids[f]), failing through bag_error(); checks that the non-NULL buffers
  // are of the right kind (host or device).
  virtual void read_bags(const JaggedBatch &in, const char *what,
                         const void *pooled, const void *const *rows) = 0;
  // Plans every table on its features' ids (plans_[t]: the send counts, or
  // reject_id()).
  virtual void plan_tables(const char *what) = 0;
  // After the header round: sends the ids (one exchange) and the owners'
  // side of it.
  virtual void route_ids() = 0;
  // The header round and route_ids in one exchange, where the exchange
  // learns the receive sizes from the round itself (Exchange::
  // sized_in_one_round, the same on every rank): each peer's header (k
  // words per peer in `headers`, rank order), then its ids; take_headers
  // on what arrived. False: not folded here, nothing sent (the caller runs
  // the two rounds).
  // phase: the call's timeline phase (emb.header; emb.ids once folded).
  virtual bool route_with_header(const int64_t *headers, size_t k,
                                 const Outcome &o, int op, const char *what,
                                 std::optional<timeline::Span> &phase) {
    (void)headers, (void)k, (void)o, (void)op, (void)what, (void)phase;
    return false;
  }
  // The rows back (one exchange) and the pooling.
  virtual void rows_and_pool(const JaggedBatch &in, float *out,
                             float *const *unpooled) = 0;
  // Whether this rank's ids equal its last lookup's, exactly.
  virtual bool same_ids() = 0;
  // Exchanges the per-call state (plans, bags, buffers) with the spare set
  // that holds a started lookup (override: call the base's too).
  virtual void swap_state();
  // Every table's partial sums per unique id, in send order.
  virtual void expand_grads(const float *grad_out,
                            const float *const *grad_unpooled) = 0;
  // Sends the partial sums behind a verdict header (one exchange; the
  // header from verdict()) and, when every rank's verdict is OK
  // (verdicts()), applies them; returns false when some rank could not
  // reuse (nothing applied). dense_count_ floats of dense_ ride at the end
  // of each peer's block in every such round and are summed into
  // dense_.recv by the round that applies (after the optimizer steps: a
  // failed call leaves recv as it was).
  virtual bool send_partials(Outcome &o, bool reuse, const char *what) = 0;
  // Whether send_partials carries a dense sum (host collections).
  virtual bool sums_dense() const { return false; }
  // Checks apply_gradients' dense buffer (throws naming what is wrong).
  void check_dense(const DenseSum &d, const char *what) const;

  // ---- Shared pieces.
  // Feature f's name, table, pooling and dim as named fields (checked
  // across ranks at creation).
  void describe_feature(size_t f, ConfigFields *out) const;
  [[noreturn]] void bag_error(const char *what, size_t f, int64_t kind,
                              int64_t sample, int64_t value) const;
  // Layout of a payload [peer][header, table 0, table 1, ...] with
  // `per_id[t]` bytes per id of table t: out along the plans (requesters to
  // owners: send_counts out, recv_counts in) or back. sb_/rb_: bytes per
  // peer; sat_/rat_[p * (T + 1)]: peer p's block, [p * (T + 1) + 1 + t]:
  // its table t; stotal_/rtotal_: the payload sizes. With self_in_place_,
  // this rank's own block is empty (no header, no ids): its share never
  // rides the exchange (the board would copy it in and out again).
  // trailer: bytes after the tables in every block but an in-place own
  // one (the dense floats of the update).
  void layouts(size_t header, const std::vector<size_t> &per_id, bool back,
               size_t trailer = 0);
  int64_t sat(int p, size_t t) const {
    return sat_[p * (tables_.size() + 1) + 1 + t];
  }
  int64_t rat(int p, size_t t) const {
    return rat_[p * (tables_.size() + 1) + 1 + t];
  }
  // Table t's part of peer p's block, from the block's start (the blocks
  // filled and delivered in place: Collection::exchange).
  int64_t sin_block(int p, size_t t) const {
    return sat(p, t) - sat_[p * (tables_.size() + 1)];
  }
  int64_t rin_block(int p, size_t t) const {
    return rat(p, t) - rat_[p * (tables_.size() + 1)];
  }
  void count_round();  // the stats of one exchange of sb_ / rb_
  static constexpr size_t kVerdictWords = 5;
  void verdict(const Outcome &o, bool ok, int64_t *h) const;
  // Checks every peer's verdict header (world x kVerdictWords): the calls
  // first (a matched call counts, see seq_), then this rank's own outcome
  // o, then the peers'; throws on a failure or another call, returns
  // whether all could reuse.
  bool verdicts(const int64_t *h, const Outcome &o, const char *what);
  // Every rank made this call (the headers' call ids agree): it counts.
  void matched() { seq_ = call_seq_ + 1; }
  // Checks every rank's lookup header (world x k words: {status,
  // has_detail, detail, call id, counts per table}): the calls first (a
  // matched call counts), then this rank's own outcome o, then the peers';
  // throws on a failure or another call, else takes the peers' counts as
  // the plans' receive counts.
  void take_headers(const int64_t *h, size_t k, const Outcome &o, int op,
                    const char *what);

  std::vector<Feature> features_;
  std::unique_ptr<Exchange> x_;
  int rank_, world_;
  uint64_t id_ = 0;
  // A start's rounds are running on the progress thread (settle()); their
  // failure, reported by the wait.
  bool inflight_ = false;
  std::exception_ptr start_error_;
  // For a derived destructor: settles whatever the outcome.
  void drop_inflight();
  // Matched calls so far: part of every header. Like a table's call
  // counter it advances only when every rank made the same call (whether
  // or not some rank then failed it), so a mismatched call leaves the
  // ranks' counters equal and the next matched call works.
  uint64_t seq_ = 0;
  uint64_t call_seq_ = 0;  // seq_ when the running call started
  std::vector<int64_t> column_;
  int64_t pooled_width_ = 0;
  // The distinct tables ("slots"), each with its plan.
  std::vector<Table *> tables_;
  // The owner halves of all tables in one go, when they can (Table::
  // batch_with: tables on the ps tasks); nullptr otherwise.
  std::unique_ptr<OwnerBatch> batch_;
  std::vector<std::vector<size_t>> slot_features_;  // in feature order
  std::vector<StepPlan> plans_;
  std::vector<size_t> row_bytes_;  // slot -> wire row bytes
  std::vector<size_t> slot_of_;    // feature -> slot
  std::vector<size_t> start_;      // feature -> first index in its slot's ids
  std::vector<size_t> n_;          // feature -> id count in this call
  std::vector<int64_t> base_;      // feature -> index of its first id
  bool plan_valid_ = false;        // the last call was a successful lookup
  // A started lookup waits in the spare state (swap_state) with its
  // batch and outputs.
  bool pending_ = false;
  JaggedBatch pending_in_;
  float *pending_out_ = nullptr;
  float *const *pending_unpooled_ = nullptr;
  std::vector<StepPlan> spare_plans_;
  std::vector<size_t> spare_start_, spare_n_;
  std::vector<int64_t> spare_base_;
  CollectionStats stats_;
  std::vector<int64_t> sb_, rb_, sat_, rat_;  // payload layouts
  int64_t stotal_ = 0, rtotal_ = 0;
  // Host collections read their own share from the plan and the owner's
  // buffers, never from the exchange (layouts); device ones send it.
  bool self_in_place_ = false;
  // The dense buffer of the running update (apply_gradients' dense) and its
  // floats still to send: every rank sends its count, so ranks that pass
  // different counts fail the exchange with HB_ERR_MISMATCH.
  DenseSum dense_;
  size_t dense_count_ = 0;
  bool dense_call_ = false;  // hb_collection_apply_gradients_dense

 private:
  void read_batch(const JaggedBatch &in, const char *what, const void *pooled,
                  const void *const *rows, const char *pooled_name,
                  const char *rows_name);
  // read_batch for a lookup or a start: refused while a lookup is pending.
  void read_lookup(const JaggedBatch &in, const char *what, float *out,
                   float *const *unpooled);
  // Plans every table and exchanges the header (one round: status, call id,
  // counts of every table) and the ids; op: lookup or update.
  void plan_and_route(Outcome &o, int op, const char *what);
};

// A collection of host tables; inputs, outputs and gradients in host memory.
class Collection : public CollectionBase {
 public:
  // Collective: checks that every rank passed the same features.
  Collection(std::vector<Feature> features, std::unique_ptr<Exchange> x);
  ~Collection() override;

 private:
  // A feature's bags in this call: ids[0, n), bag b = [bag[b], bag[b+1]).
  struct Bags {
    const int64_t *ids = nullptr;
    const float *w = nullptr;
    std::vector<int64_t> bag;
    bool one = false;  // every bag holds one id: bag b = [b, b + 1)
  };
  // Per-call buffers of a table.
  struct Slot {
    // Concatenated ids of its features.
    std::vector<int64_t, NoFill<int64_t>> ids;
    std::vector<int64_t> recv_ids;  // packed by source rank
    // The received ids: recv_ids, or at world 1 the plan's send_ids()
    // (what recv_ids would copy); nullptr where the owner deduplicated
    // them (owner_nu >= 0): the owner's calls then read the plan's
    // owner().unique() and never recv.
    const int64_t *recv = nullptr;
    size_t nrecv = 0;
    int64_t owner_nu = -1;  // StepPlan::owner_dedup's result
    // Rows / partial sums in send order.
    std::vector<float, NoFill<float>> partial;
    // Owner side, received order.
    std::vector<unsigned char, NoFill<unsigned char>> wire;
  };

  void read_bags(const JaggedBatch &in, const char *what, const void *pooled,
                 const void *const *rows) override;
  void plan_tables(const char *what) override;
  void route_ids() override;
  bool route_with_header(const int64_t *headers, size_t k, const Outcome &o,
                         int op, const char *what,
                         std::optional<timeline::Span> &phase) override;
  // The ids this rank sends peer p, table after table, at out.
  void put_ids(int p, unsigned char *out) const;
  // The owners' side of the ids round: what each peer p != rank sent,
  // table after table from from[p] (its recv_counts), and this rank's own
  // share from its plan; then each table's owner dedup.
  void take_ids(const std::vector<const unsigned char *> &from);
  void rows_and_pool(const JaggedBatch &in, float *out,
                     float *const *unpooled) override;
  bool same_ids() override;
  void expand_grads(const float *grad_out,
                    const float *const *grad_unpooled) override;
  bool send_partials(Outcome &o, bool reuse, const char *what) override;
  bool sums_dense() const override { return true; }
  // recv = the rank-order sum of every rank's dense floats: this rank's
  // from its send buffer, the peers' from dense_in_.
  void sum_dense();
  void swap_state() override;
  void exchange();  // sbuf_ -> rbuf_ along sb_ / rb_
  // The same exchange with each peer's block written by fill(p, dst) and
  // read by deliver(p, block) in place (Exchange::alltoallv_fill: on the
  // call board, the slots); deliver skips this rank's own, empty block.
  using Fill = std::function<void(int, unsigned char *)>;
  using Deliver = std::function<void(int, const unsigned char *)>;
  void exchange(const Fill &fill, const Deliver &deliver);
  // Table t's rows and partial sums skip the wire buffers (world 1, float32
  // wire rows): the owner's rows are the requester's, byte for byte.
  bool direct_rows(size_t t) const;
  // Table t's lookup pools straight from its shard's records
  // (Table::records_in_place; world 1, float32 wire rows): no rows are
  // gathered into the partial rows first.
  bool rows_in_place(size_t t) const;
  // Its records are large enough that the pool prefetches them.
  bool prefetch_rows(size_t t) const;
  // Where rank's share starts in a plan's send / received order.
  static int64_t send_at(const StepPlan &pl, int rank);
  static int64_t recv_at(const StepPlan &pl, int rank);

  std::vector<Slot> slots_, spare_slots_;
  std::vector<Bags> bags_, spare_bags_;
  std::vector<unsigned char, NoFill<unsigned char>> sbuf_, rbuf_;
  // The peers' dense floats of the running update (rank p's at p x count).
  std::vector<float, NoFill<float>> dense_in_;
  // take_ids' per-source cursors and block starts (kept: no allocation
  // per step).
  std::vector<const unsigned char *> take_at_;
  std::vector<const int64_t *> take_blocks_;
};

}  // namespace emb
}  // namespace hb
