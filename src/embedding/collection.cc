#include "embedding/collection.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <optional>
#include <type_traits>

#include "abi/error.h"
#include "comm/rank_order.h"
#include "embedding/dim_dispatch.h"
#include "embedding/wire.h"
#include "timeline/timeline.h"

namespace hb {
namespace emb {
namespace {

enum Op : int64_t { kLookup = 1, kUpdate = 2, kLookupStart = 3 };

const char *op_name(int64_t op) {
  return op == kLookup        ? "hb_collection_lookup"
         : op == kUpdate      ? "hb_collection_apply_gradients"
         : op == kLookupStart ? "hb_collection_lookup_start"
                              : "an unknown call";
}

// The words every header starts with after {status, ...}: which collection,
// which call, which step. Ranks must agree on all three.
struct CallId {
  int64_t coll, op, seq;
};

// Fails with HB_ERR_MISMATCH when peer p's call differs from mine.
void check_call(const CallId &mine, const int64_t *theirs, int p,
                const char *what) {
  if (theirs[0] == mine.coll && theirs[1] == mine.op && theirs[2] == mine.seq)
    return;
  fail(HB_ERR_MISMATCH,
       "%s: rank %d made a different call: %s on collection %016llx at call "
       "%lld, this rank %s on collection %016llx at call %lld",
       what, p, op_name(theirs[1]), (unsigned long long)theirs[0],
       (long long)theirs[2], op_name(mine.op), (unsigned long long)mine.coll,
       (long long)mine.seq);
}

void check_peer_status(const int64_t *h, int p, const char *what) {
  if (h[0] == HB_OK) return;
  hb_status st = static_cast<hb_status>(h[0]);
  if (h[1])
    fail(st, "%s: rank %d failed with %s (id %lld)", what, p,
         hb_status_name(st), (long long)h[2]);
  fail(st, "%s: rank %d failed with %s", what, p, hb_status_name(st));
}

// The per-id loops of the host collection, for a row width known at
// compile time (kDim > 0: the common dims, unrolled and vectorised without
// a remainder) or at run time (kDim == 0). Both make the same float
// operations in the same order.
template <int kDim>
struct RowOps {
  static constexpr int kWidth = kDim;
  // d = s, d += s, d = sc * s, d += sc * s (the product rounded before the
  // add: no FMA) over one row. The rows never overlap (__restrict): without
  // that GCC kept the constant-width loops scalar.
  static void set(float *__restrict d, const float *__restrict s, int64_t dim) {
    for (int64_t c = 0; c < dim; ++c) d[c] = s[c];
  }
  static void add(float *__restrict d, const float *__restrict s, int64_t dim) {
    for (int64_t c = 0; c < dim; ++c) d[c] += s[c];
  }
  static void set_scaled(float *__restrict d, const float *__restrict s,
                         float sc, int64_t dim) {
    for (int64_t c = 0; c < dim; ++c) d[c] = sc * s[c];
  }
  static void add_scaled(float *__restrict d, const float *__restrict s,
                         float sc, int64_t dim) {
    for (int64_t c = 0; c < dim; ++c) {
      const float g = sc * s[c];
      d[c] += g;
    }
  }
  // Feature f's pooled output (or unpooled rows) from its ids' rows:
  // row(k) is id k's row (the gathered rows in send order, or the shard's
  // records read in place), called once per id in increasing k.
  // one: every bag holds one id (Bags::one), bag b = [b, b + 1).
  template <class Row>
  static void pool(int64_t dim_rt, Row row, const float *w, const int64_t *bag,
                   int64_t B, size_t n, int32_t pooling, float *out,
                   int64_t stride, bool one) {
    const int64_t dim = kDim > 0 ? kDim : dim_rt;
    if (one && pooling != HB_POOLING_NONE) {
      pool_one(row, w, B, pooling, out, stride, dim);
      return;
    }
    if (pooling == HB_POOLING_NONE) {
      for (size_t k = 0; k < n; ++k) {
        const float *r = row(k);
        float *o = out + k * dim;
        if (w)
          for (int64_t c = 0; c < dim; ++c) o[c] = w[k] * r[c];
        else
          for (int64_t c = 0; c < dim; ++c) o[c] = r[c];
      }
      return;
    }
    for (int64_t b = 0; b < B; ++b) {
      float *o = out + b * stride;
      const int64_t lo = bag[b], hi = bag[b + 1];
      if (lo == hi) {
        for (int64_t c = 0; c < dim; ++c) o[c] = 0.0f;
        continue;
      }
      if (w) {
        set_scaled(o, row(lo), w[lo], dim);
        for (int64_t k = lo + 1; k < hi; ++k) add_scaled(o, row(k), w[k], dim);
      } else {
        set(o, row(lo), dim);
        for (int64_t k = lo + 1; k < hi; ++k) add(o, row(k), dim);
      }
      if (pooling == HB_POOLING_SUM) continue;
      const float d = pooling == HB_POOLING_MEAN
                          ? static_cast<float>(hi - lo)
                          : std::sqrt(static_cast<float>(hi - lo));
      for (int64_t c = 0; c < dim; ++c) o[c] /= d;
    }
  }
  // pool() over one id per bag: the same operations per bag (the row, or
  // its product with the weight; then the divisor of a one-id bag), without
  // the bounds, the empty-bag test and the inner loop per bag.
  template <class Row>
  static void pool_one(Row row, const float *w, int64_t B, int32_t pooling,
                       float *out, int64_t stride, int64_t dim) {
    if (!w && pooling == HB_POOLING_SUM) {
      for (int64_t b = 0; b < B; ++b) set(out + b * stride, row(b), dim);
      return;
    }
    const float d = pooling == HB_POOLING_MEAN    ? static_cast<float>(1)
                    : pooling == HB_POOLING_SQRTN ? std::sqrt(1.0f)
                                                  : 0.0f;
    for (int64_t b = 0; b < B; ++b) {
      float *o = out + b * stride;
      if (w)
        set_scaled(o, row(b), w[b], dim);
      else
        set(o, row(b), dim);
      if (pooling == HB_POOLING_SUM) continue;
      for (int64_t c = 0; c < dim; ++c) o[c] /= d;
    }
  }

  // Feature f's per-id gradients, summed straight into the partial sums
  // of its table's unique ids (partial + pos[inv[i]] * dim, i = first + k):
  // the first occurrence of an id (inv numbers ids in first-occurrence
  // order: *next is the next new one) is assigned, later ones are added,
  // in batch order -- sum_rows' order, without the per-id rows in between.
  // pos == nullptr: the send order is the unique order (world 1), and the
  // loops skip that load per id. one: as in pool().
  static void expand(int64_t dim_rt, const float *grad, int64_t stride,
                     const float *w, const int64_t *bag, int64_t B, size_t n,
                     int32_t pooling, bool one, const uint32_t *inv,
                     const uint32_t *pos, uint32_t *next, float *partial) {
    if (pos)
      expand_at(
          dim_rt, grad, stride, w, bag, B, n, pooling, one, inv,
          [pos](uint32_t u) { return pos[u]; }, next, partial);
    else
      expand_at(
          dim_rt, grad, stride, w, bag, B, n, pooling, one, inv,
          [](uint32_t u) { return u; }, next, partial);
  }
  template <class Pos>
  static void expand_at(int64_t dim_rt, const float *grad, int64_t stride,
                        const float *w, const int64_t *bag, int64_t B, size_t n,
                        int32_t pooling, bool one, const uint32_t *inv, Pos pos,
                        uint32_t *next, float *partial) {
    const int64_t dim = kDim > 0 ? kDim : dim_rt;
    uint32_t nx = *next;  // in a register: *next might alias inv
    // Inlined by force: GCC kept this lambda out of line (a call per id,
    // nx stored and reloaded through memory around each one).
    auto put = [&](size_t k, const float *src, bool scaled, float sc)
        __attribute__((always_inline)) {
      const uint32_t u = inv[k];
      float *d = partial + static_cast<size_t>(pos(u)) * dim;
      if constexpr (kDim > 0) {
        static_assert(kDim <= 64, "kNegZeroRow is narrower than the row");
        // Without a branch (callgrind: 0.44 mispredicts per demo id with
        // one): a new id's row adds to -0.0f, set's bits (select_row).
        const uint32_t first = u == nx;
        nx += first;
        const float *base = select_row(d, first);
        float r[kDim];  // base may be d: through a copy, keeping __restrict
        set(r, base, kDim);
        if (scaled)
          add_scaled(r, src, sc, kDim);
        else
          add(r, src, kDim);
        set(d, r, kDim);
        return;
      }
      if (u == nx) {
        ++nx;
        if (scaled)
          set_scaled(d, src, sc, dim);
        else
          set(d, src, dim);
      } else if (scaled) {
        add_scaled(d, src, sc, dim);
      } else {
        add(d, src, dim);
      }
    };
    if (pooling == HB_POOLING_NONE) {
      for (size_t k = 0; k < n; ++k)
        put(k, grad + k * dim, w != nullptr, w ? w[k] : 1.0f);
      *next = nx;
      return;
    }
    if (pooling == HB_POOLING_SUM && !w && one) {  // id b is bag b's
      for (int64_t b = 0; b < B; ++b) put(b, grad + b * stride, false, 1.0f);
      *next = nx;
      return;
    }
    if (pooling == HB_POOLING_SUM && !w) {
      // The per-bag tests hoisted; each bag's end is the next one's start.
      int64_t lo = bag[0];
      for (int64_t b = 0; b < B; ++b) {
        const int64_t hi = bag[b + 1];
        const float *src = grad + b * stride;
        for (int64_t k = lo; k < hi; ++k) put(k, src, false, 1.0f);
        lo = hi;
      }
      *next = nx;
      return;
    }
    for (int64_t b = 0; b < B; ++b) {
      const int64_t lo = bag[b], hi = bag[b + 1];
      if (lo == hi) continue;
      const float *src = grad + b * stride;
      if (pooling == HB_POOLING_SUM) {  // weighted: no divisor per bag
        for (int64_t k = lo; k < hi; ++k) put(k, src, true, w[k]);
        continue;
      }
      const float d = pooling == HB_POOLING_MEAN
                          ? static_cast<float>(hi - lo)
                          : std::sqrt(static_cast<float>(hi - lo));
      for (int64_t k = lo; k < hi; ++k)
        put(k, src, true, (w ? w[k] : 1.0f) / d);
    }
    *next = nx;
  }
};

// Calls fn(RowOps<dim>()) for a common dim, else fn(RowOps<0>()).
template <class F>
void with_row_ops(int64_t dim, F &&fn) {
  with_dim(dim, [&](auto kdim) { fn(RowOps<decltype(kdim)::value>()); });
}

// How many ids ahead a lookup that reads a shard's records in place
// prefetches their rows (Collection::prefetch_rows), and from which table
// size on (records, bytes: about one core's L2 here; below it the rows
// stay cached from step to step and the prefetch only costs instructions).
constexpr size_t kPoolAhead = 8;
constexpr uint64_t kPoolPrefetchBytes = uint64_t{1} << 20;

}  // namespace

CollectionBase::CollectionBase(std::vector<Feature> features,
                               std::unique_ptr<Exchange> x, bool device)
    : features_(std::move(features)),
      x_(std::move(x)),
      rank_(x_->rank()),
      world_(x_->world()) {
  const char *what = "hb_collection_create";
  Outcome o;
  ConfigFields fields;  // what every rank must pass alike
  fields.add("features", static_cast<int64_t>(features_.size()));
  try {
    HB_CHECK_ARG(!features_.empty(), "%s: no features", what);
    column_.assign(features_.size(), -1);
    slot_of_.resize(features_.size());
    const Feature *first_gpu = nullptr;
    for (const Feature &ft : features_)
      if (!first_gpu && ft.table && (ft.device || ft.table->spec().device >= 0))
        first_gpu = &ft;
    for (size_t f = 0; f < features_.size(); ++f) {
      Feature &ft = features_[f];
      if (ft.name.empty()) ft.name = "feature" + std::to_string(f);
      HB_CHECK_ARG(ft.table, "%s: feature %zu ('%s') has no table", what, f,
                   ft.name.c_str());
      const Spec &sp = ft.table->spec();
      if (!device && sp.device >= 0)
        fail(HB_ERR_UNSUPPORTED,
             "%s: feature '%s': table '%s' lives on a GPU, but this "
             "collection takes host tables",
             what, ft.name.c_str(), sp.name.c_str());
      if (device && (!ft.device || sp.device < 0))
        fail(HB_ERR_UNSUPPORTED,
             "%s: feature '%s': table '%s' is a host table, but feature '%s' "
             "reads GPU table '%s': a collection's tables all live on the "
             "host or all on the GPU",
             what, ft.name.c_str(), sp.name.c_str(),
             first_gpu ? first_gpu->name.c_str() : "?",
             first_gpu ? first_gpu->table->spec().name.c_str() : "?");
      if (device && sp.device != features_[0].table->spec().device)
        fail(HB_ERR_UNSUPPORTED,
             "%s: feature '%s': table '%s' is on device %d, feature '%s''s "
             "on device %d: a collection's tables share one GPU",
             what, ft.name.c_str(), sp.name.c_str(), sp.device,
             features_[0].name.c_str(), features_[0].table->spec().device);
      HB_CHECK_ARG(
          ft.pooling >= HB_POOLING_NONE && ft.pooling <= HB_POOLING_SQRTN,
          "%s: feature '%s': pooling %d is not an hb_pooling_code", what,
          ft.name.c_str(), ft.pooling);
      HB_CHECK_ARG(ft.table->exchange().world() == world_ &&
                       ft.table->exchange().rank() == rank_,
                   "%s: feature '%s': table '%s' is on another context", what,
                   ft.name.c_str(), sp.name.c_str());
      size_t s = 0;
      while (s < tables_.size() && tables_[s] != ft.table) ++s;
      if (s == tables_.size()) {
        tables_.push_back(ft.table);
        slot_features_.emplace_back();
        plans_.emplace_back(sp, rank_, world_);
        row_bytes_.push_back(ft.table->wire_row_bytes());
      }
      slot_features_[s].push_back(f);
      slot_of_[f] = s;
      if (ft.pooling != HB_POOLING_NONE) {
        column_[f] = pooled_width_;
        pooled_width_ += sp.dim;
      }
      describe_feature(f, &fields);
    }
    start_.resize(features_.size());
    n_.resize(features_.size());
    base_.resize(features_.size());
    spare_plans_ = plans_;
    spare_start_ = start_, spare_n_ = n_, spare_base_ = base_;
  } catch (...) {
    o.capture();
  }
  const uint64_t fp = fields.fingerprint();
  id_ = fp >> 1;  // positive as an int64 in messages
  std::vector<int64_t> got =
      agree(*x_, o, std::vector<int64_t>(world_, static_cast<int64_t>(fp)),
            what, nullptr);
  check_same_fields(
      fields, std::vector<uint64_t>(got.begin(), got.end()),
      [this](const std::string &s) { return gather_strings(*x_, s); },
      HB_ERR_INVALID_ARGUMENT, what, "features");
}

void CollectionBase::describe_feature(size_t f, ConfigFields *out) const {
  static const char *const kPooling[] = {"HB_POOLING_NONE", "HB_POOLING_SUM",
                                         "HB_POOLING_MEAN", "HB_POOLING_SQRTN"};
  const Feature &ft = features_[f];
  const Spec &sp = ft.table->spec();
  const std::string key = format("features[%zu].", f),
                    label = format("feature %zu ('%s') ", f, ft.name.c_str());
  out->add(key + "name", "'" + ft.name + "'", format("feature %zu name", f));
  out->add(key + "table", "'" + sp.name + "'", label + "table");
  out->add(key + "pooling", kPooling[ft.pooling], label + "pooling");
  out->add(key + "dim", format("%lld", (long long)sp.dim), label + "dim");
  // Tables of one name agree (checked at their creation); which features
  // share a table follows from the names.
  out->add_hash(key + "table config", spec_fingerprint(sp));
}

void CollectionBase::bag_error(const char *what, size_t f, int64_t kind,
                               int64_t sample, int64_t value) const {
  const char *name = features_[f].name.c_str();
  if (kind == 1)
    fail(HB_ERR_INVALID_ARGUMENT, "%s: feature '%s': offsets[0] = %lld < 0",
         what, name, (long long)value);
  if (kind == 2)
    fail(HB_ERR_INVALID_ARGUMENT,
         "%s: feature '%s': offsets decrease at sample %lld", what, name,
         (long long)sample);
  fail(HB_ERR_INVALID_ARGUMENT, "%s: feature '%s': length %lld at sample %lld",
       what, name, (long long)value, (long long)sample);
}

void CollectionBase::read_batch(const JaggedBatch &in, const char *what,
                                const void *pooled, const void *const *rows,
                                const char *pooled_name,
                                const char *rows_name) {
  HB_CHECK_ARG(in.error.empty(), "%s", in.error.c_str());
  const int64_t B = in.batch;
  HB_CHECK_ARG(B >= 0, "%s: batch_size %lld < 0", what, (long long)B);
  HB_CHECK_ARG(B == 0 || in.offsets || in.lengths,
               "%s: offsets and lengths are both NULL", what);
  for (size_t f = 0; f < features_.size() && B > 0; ++f)
    HB_CHECK_ARG(in.offsets ? in.offsets[f] : in.lengths[f],
                 "%s: %s of feature '%s' is NULL", what,
                 in.offsets ? "offsets" : "lengths", features_[f].name.c_str());
  read_bags(in, what, pooled, rows);
  std::vector<size_t> next(tables_.size(), 0);
  for (size_t f = 0; f < features_.size(); ++f) {
    const char *name = features_[f].name.c_str();
    const size_t n = n_[f];
    HB_CHECK_ARG(n < IdMap::kEmpty, "%s: feature '%s': %zu ids, too many", what,
                 name, n);
    if (n)
      HB_CHECK_ARG(in.ids && in.ids[f], "%s: ids of feature '%s' is NULL", what,
                   name);
    size_t s = slot_of_[f];
    start_[f] = next[s];
    next[s] += n;
    HB_CHECK_ARG(next[s] < IdMap::kEmpty, "%s: table '%s': too many ids", what,
                 tables_[s]->spec().name.c_str());
    stats_.ids += n;
    if (features_[f].pooling == HB_POOLING_NONE)
      HB_CHECK_ARG(n == 0 || (rows && rows[f]),
                   "%s: feature '%s' has pooling NONE and %s[%zu] is NULL",
                   what, name, rows_name, f);
  }
  HB_CHECK_ARG(B == 0 || pooled_width_ == 0 || pooled, "%s: %s is NULL", what,
               pooled_name);
}

void CollectionBase::layouts(size_t header, const std::vector<size_t> &per_id,
                             bool back, size_t trailer) {
  // Out along the plans: what this rank sends as a requester (send_counts)
  // and receives as an owner (recv_counts); back: the other way round.
  const size_t T = tables_.size();
  for (int side = 0; side < 2; ++side) {
    const bool sent = (side == 0) != back;
    std::vector<int64_t> &bytes = side == 0 ? sb_ : rb_;
    std::vector<int64_t> &at = side == 0 ? sat_ : rat_;
    bytes.assign(world_, 0);
    at.resize(world_ * (T + 1));
    int64_t off = 0;
    for (int p = 0; p < world_; ++p) {
      at[p * (T + 1)] = off;
      const bool none = self_in_place_ && p == rank_;
      int64_t b = none ? 0 : static_cast<int64_t>(header);
      for (size_t t = 0; t < T; ++t) {
        at[p * (T + 1) + 1 + t] = off + b;
        const StepPlan &pl = plans_[t];
        if (!none)
          b += (sent ? pl.send_counts()[p] : pl.recv_counts()[p]) *
               static_cast<int64_t>(per_id[t]);
      }
      if (!none) b += static_cast<int64_t>(trailer);
      bytes[p] = b;
      off += b;
    }
    (side == 0 ? stotal_ : rtotal_) = off;
  }
}

void CollectionBase::count_round() {
  ++stats_.rounds;
  for (int p = 0; p < world_; ++p)
    if (p != rank_) {
      stats_.wire_bytes_sent += sb_[p];
      stats_.wire_bytes_recv += rb_[p];
    }
}

void CollectionBase::verdict(const Outcome &o, bool ok, int64_t *h) const {
  h[0] = o.status, h[1] = ok, h[2] = static_cast<int64_t>(id_);
  h[3] = kUpdate, h[4] = static_cast<int64_t>(call_seq_);
}

bool CollectionBase::verdicts(const int64_t *h, const Outcome &o,
                              const char *what) {
  const CallId me{static_cast<int64_t>(id_), kUpdate,
                  static_cast<int64_t>(call_seq_)};
  for (int p = 0; p < world_; ++p)
    check_call(me, h + p * kVerdictWords + 2, p, what);
  matched();
  if (o.status != HB_OK) throw Error(o.status, o.message);
  bool all_ok = true;
  for (int p = 0; p < world_; ++p) {
    const int64_t *v = h + p * kVerdictWords;
    int64_t st[3] = {v[0], 0, 0};
    check_peer_status(st, p, what);
    all_ok = all_ok && v[1];
  }
  return all_ok;
}

void CollectionBase::plan_and_route(Outcome &o, int op, const char *what) {
  const size_t T = tables_.size();
  // One timeline span per phase (a new one ends the last).
  std::optional<timeline::Span> phase;
  phase.emplace("emb.plan", "embedding");
  if (o.status == HB_OK) {
    try {
      plan_tables(what);
    } catch (...) {
      o.capture();
      for (const StepPlan &pl : plans_)
        if (pl.bad_id()) {
          o.has_detail = true;
          o.detail = *pl.bad_id();
        }
    }
  }
  // One header per peer: {status, has_detail, detail, call id, counts}.
  phase.emplace("emb.header", "embedding");
  const CallId me{static_cast<int64_t>(id_), op,
                  static_cast<int64_t>(call_seq_)};
  const size_t k = 6 + T;
  std::vector<int64_t> send(k * world_, 0), recv(k * world_);
  for (int p = 0; p < world_; ++p) {
    int64_t *h = &send[p * k];
    h[0] = o.status, h[1] = o.has_detail, h[2] = o.detail;
    h[3] = me.coll, h[4] = me.op, h[5] = me.seq;
    if (o.status == HB_OK)
      for (size_t t = 0; t < T; ++t) h[6 + t] = plans_[t].send_counts()[p];
  }
  // Where the exchange learns the receive sizes from the round itself,
  // the headers ride in front of the ids: one round, not two.
  if (route_with_header(send.data(), k, o, op, what, phase)) return;
  ++stats_.rounds;
  stats_.wire_bytes_sent += k * 8 * (world_ - 1);
  stats_.wire_bytes_recv += k * 8 * (world_ - 1);
  x_->alltoall(send.data(), recv.data(), k);
  take_headers(recv.data(), k, o, op, what);
  // The ids, per peer table after table (part of the ids phase: the
  // owners' dedup).
  phase.emplace("emb.ids", "embedding");
  route_ids();
}

void CollectionBase::take_headers(const int64_t *h, size_t k, const Outcome &o,
                                  int op, const char *what) {
  const CallId me{static_cast<int64_t>(id_), op,
                  static_cast<int64_t>(call_seq_)};
  // Calls first: ranks that made different calls all report the mismatch
  // (and none counts the call); then this rank's failure, then the peers'.
  for (int p = 0; p < world_; ++p) check_call(me, &h[p * k + 3], p, what);
  matched();
  if (o.status != HB_OK) throw Error(o.status, o.message);
  for (int p = 0; p < world_; ++p) check_peer_status(&h[p * k], p, what);
  for (size_t t = 0; t < tables_.size(); ++t) {
    std::vector<int64_t> rc(world_);
    for (int p = 0; p < world_; ++p) rc[p] = h[p * k + 6 + t];
    plans_[t].set_recv_counts(std::move(rc));
  }
}

void CollectionBase::lookup(const JaggedBatch &in, float *out,
                            float *const *unpooled) {
  const char *what = "hb_collection_lookup";
  settle();  // a started lookup's rounds first (then refused: it is pending)
  call_seq_ = seq_;
  ++stats_.lookups;
  // Refused while a started lookup is pending: then the plan of the lookup
  // before it stays usable (nothing below touches it).
  if (!pending_) plan_valid_ = false;
  Outcome o;
  try {
    read_lookup(in, what, out, unpooled);
  } catch (...) {
    o.capture();
  }
  plan_and_route(o, kLookup, what);
  rows_and_pool(in, out, unpooled);
  plan_valid_ = true;
}

void CollectionBase::read_lookup(const JaggedBatch &in, const char *what,
                                 float *out, float *const *unpooled) {
  HB_CHECK_ARG(!pending_,
               "%s: a lookup started by hb_collection_lookup_start is "
               "pending: call hb_collection_lookup_wait first",
               what);
  read_batch(in, what, out, reinterpret_cast<const void *const *>(unpooled),
             "out", "unpooled");
}

void CollectionBase::swap_state() {
  plans_.swap(spare_plans_);
  start_.swap(spare_start_);
  n_.swap(spare_n_);
  base_.swap(spare_base_);
}

void CollectionBase::lookup_start(const JaggedBatch &in, float *out,
                                  float *const *unpooled) {
  static const char *const what = "hb_collection_lookup_start";
  settle();  // one started before it (this start is then refused)
  call_seq_ = seq_;
  Outcome o;
  const bool was_pending = pending_;
  if (!was_pending) swap_state();  // plan into the spare state
  try {
    read_lookup(in, what, out, unpooled);
  } catch (...) {
    o.capture();
  }
  pending_in_ = in;
  pending_out_ = out;
  pending_unpooled_ = unpooled;
  if (x_->async() && !was_pending && o.status == HB_OK) {
    // The header and ids rounds run on the exchange's progress thread while
    // the caller computes; settle() collects them (swap back, outcome).
    pending_ = true;
    inflight_ = true;
    x_->post([this, o]() mutable {
      try {
        plan_and_route(o, kLookupStart, what);
      } catch (...) {
        start_error_ = std::current_exception();
      }
    });
    return;
  }
  // Here: no progress thread, or this rank already failed (it reports at
  // once; its peers learn it in the same header round, at their wait).
  try {
    plan_and_route(o, kLookupStart, what);
  } catch (...) {
    // Nothing is pending after a failed start; the last lookup's plan is
    // where it was (its apply_gradients may still reuse it).
    if (!was_pending) swap_state();
    throw;
  }
  ++stats_.lookups;
  swap_state();
  pending_ = true;
}

void CollectionBase::settle() {
  if (!inflight_) return;
  x_->settle();  // bounded; throws (still in flight) on a timeout
  inflight_ = false;
  // As the synchronous start: the started state back into the spare set,
  // the last finished lookup's in place for its apply_gradients.
  swap_state();
  if (!start_error_) ++stats_.lookups;
}

void CollectionBase::drop_inflight() {
  // The job reads and writes this collection: it must end before the
  // members go. Its rounds are bounded by the exchange's timeout, and the
  // peers' progress threads run their halves of them without their
  // callers, so this returns once they are done (or failed).
  for (;;) {
    try {
      settle();
      return;
    } catch (...) {
    }
  }
}

void CollectionBase::lookup_wait() {
  settle();
  HB_CHECK_ARG(pending_,
               "hb_collection_lookup_wait: no lookup was started on this "
               "collection (hb_collection_lookup_start)");
  pending_ = false;
  if (start_error_) {
    // The start's rounds failed (on every rank): nothing is pending, the
    // lookup before it keeps its plan.
    std::exception_ptr e = start_error_;
    start_error_ = nullptr;
    std::rethrow_exception(e);
  }
  swap_state();
  plan_valid_ = false;
  rows_and_pool(pending_in_, pending_out_, pending_unpooled_);
  plan_valid_ = true;
}

void CollectionBase::check_dense(const DenseSum &d, const char *what) const {
  HB_CHECK_ARG(d.error.empty(), "%s", d.error.c_str());
  if (d.count == 0) return;
  if (!sums_dense())
    fail(HB_ERR_UNSUPPORTED,
         "%s: a collection of GPU tables does not sum a dense buffer in its "
         "step (not implemented): pass no dense buffer and reduce it with "
         "hb_allreduce",
         what);
  HB_CHECK_ARG(d.send && d.recv, "%s: dense->%s is NULL with count %zu", what,
               d.send ? "recv" : "send", d.count);
  HB_CHECK_ARG(d.count <= (size_t{1} << 40),
               "%s: dense->count %zu is too large", what, d.count);
  const uintptr_t s = reinterpret_cast<uintptr_t>(d.send),
                  r = reinterpret_cast<uintptr_t>(d.recv), n = d.count * 4;
  HB_CHECK_ARG(s == r || s + n <= r || r + n <= s,
               "%s: dense->send and dense->recv overlap without being the "
               "same buffer",
               what);
}

void CollectionBase::apply_gradients(const JaggedBatch &in,
                                     const float *grad_out,
                                     const float *const *grad_unpooled,
                                     const DenseSum *dense) {
  const char *what = dense ? "hb_collection_apply_gradients_dense"
                           : "hb_collection_apply_gradients";
  settle();  // the started lookup's rounds (the rows wait for the wait)
  call_seq_ = seq_;
  ++stats_.updates;
  const bool speculate = plan_valid_;  // the same on every rank
  plan_valid_ = false;
  dense_call_ = dense != nullptr;
  dense_ = dense ? *dense : DenseSum();
  // Sent whatever this rank's outcome, so that the round's sizes depend on
  // the counts alone (a bad buffer fails in the verdicts, not the sizes).
  dense_count_ = sums_dense() ? dense_.count : 0;
  Outcome o;
  bool same = false;
  try {
    check_dense(dense_, what);
    read_batch(in, what, grad_out,
               reinterpret_cast<const void *const *>(grad_unpooled), "grad_out",
               "grad_unpooled");
    if (speculate) {
      // Reuse only when this rank's ids equal its lookup's, exactly.
      same = same_ids();
      if (same) expand_grads(grad_out, grad_unpooled);
    }
  } catch (...) {
    o.capture();
  }
  if (speculate) {
    if (send_partials(o, same, what)) {
      ++stats_.reused_plans;
      return;
    }
    // Some rank's ids differ from its lookup's: plan again, all together.
  }
  plan_and_route(o, kUpdate, what);
  expand_grads(grad_out, grad_unpooled);
  if (!send_partials(o, true, what))
    fail(HB_ERR_INTERNAL, "%s: a fresh plan was refused", what);
}

// ---- Host tables.

Collection::Collection(std::vector<Feature> features,
                       std::unique_ptr<Exchange> x)
    : CollectionBase(std::move(features), std::move(x), /*device=*/false),
      slots_(tables_.size()),
      spare_slots_(tables_.size()),
      bags_(features_.size()),
      spare_bags_(features_.size()) {
  self_in_place_ = true;
  if (!tables_.empty()) batch_ = tables_[0]->batch_with(tables_);
}

Collection::~Collection() { drop_inflight(); }

void Collection::swap_state() {
  CollectionBase::swap_state();
  slots_.swap(spare_slots_);
  bags_.swap(spare_bags_);
}

void Collection::read_bags(const JaggedBatch &in, const char *what,
                           const void *, const void *const *) {
  const int64_t B = in.batch;
  for (size_t f = 0; f < features_.size(); ++f) {
    Bags &g = bags_[f];
    g.bag.resize(B + 1);  // every entry written below: no fill
    g.bag[0] = 0;
    g.one = false;
    int64_t base = 0;
    if (B > 0 && in.offsets) {
      const int64_t *o = in.offsets[f];
      if (o[0] < 0) bag_error(what, f, 1, 0, o[0]);
      base = o[0];
      // Check, then convert: loops without an error call inside (it kept
      // them scalar); the first bad sample is found only when there is
      // one. Strictly increasing offsets spanning B ids are one id per bag
      // (g.one); an empty bag (or a bad one) takes a second check. The
      // first check ORs sign bits (a vector loop: SSE2 has no 64-bit
      // compare): an offset below 0, or o[b + 1] - o[b] - 1 below 0, which
      // cannot overflow while both offsets are >= 0.
      uint64_t sign = 0;
      for (int64_t b = 0; b < B; ++b) {
        const uint64_t hi = static_cast<uint64_t>(o[b + 1]);
        sign |= hi | (hi - static_cast<uint64_t>(o[b]) - 1);
      }
      const bool flat = sign >> 63;
      bool down = false;
      for (int64_t b = 0; flat && b < B; ++b) down |= o[b + 1] < o[b];
      for (int64_t b = 0; down && b < B; ++b)
        if (o[b + 1] < o[b]) bag_error(what, f, 2, b, 0);
      int64_t *bag = g.bag.data();
      for (int64_t b = 0; b < B; ++b) bag[b + 1] = o[b + 1] - base;
      g.one = !flat && bag[B] == B;
    } else if (B > 0) {
      const int64_t *l = in.lengths[f];
      bool one = true;
      for (int64_t b = 0; b < B; ++b) {
        if (l[b] < 0 || l[b] >= (int64_t{1} << 32))
          bag_error(what, f, 3, b, l[b]);
        g.bag[b + 1] = g.bag[b] + l[b];
        one &= l[b] == 1;
      }
      g.one = one;
    }
    n_[f] = static_cast<size_t>(g.bag[B]);
    base_[f] = base;
    g.ids = n_[f] && in.ids && in.ids[f] ? in.ids[f] + base : nullptr;
    g.w = g.ids && in.weights && in.weights[f] ? in.weights[f] + base : nullptr;
  }
}

void Collection::exchange() {
  count_round();
  x_->alltoallv(sbuf_.data(), sb_.data(), rbuf_.data(), rb_.data());
}

void Collection::exchange(const Fill &fill, const Deliver &deliver) {
  count_round();
  x_->alltoallv_fill(
      sb_.data(), rb_.data(),
      [&](int p, char *dst) {
        fill(p, reinterpret_cast<unsigned char *>(dst));
      },
      [&](int p, const char *data, size_t) {
        if (p != rank_)
          deliver(p, reinterpret_cast<const unsigned char *>(data));
      });
}

void Collection::plan_tables(const char *what) {
  for (size_t t = 0; t < tables_.size(); ++t) {
    Slot &s = slots_[t];
    // Sized once (no fill), then one memcpy per feature: the range insert
    // copied id by id.
    size_t total = 0;
    for (size_t f : slot_features_[t]) total += n_[f];
    s.ids.resize(total);
    for (size_t f : slot_features_[t])
      if (n_[f]) std::memcpy(s.ids.data() + start_[f], bags_[f].ids, n_[f] * 8);
    plans_[t].prepare(s.ids.data(), s.ids.size(), s.ids.data(), what);
  }
}

void Collection::put_ids(int p, unsigned char *out) const {
  for (const StepPlan &pl : plans_) {
    const int64_t c = pl.send_counts()[p];
    if (c) std::memcpy(out, pl.send_ids().data() + send_at(pl, p), c * 8);
    out += c * 8;
  }
}

void Collection::route_ids() {
  const size_t T = tables_.size();
  std::vector<size_t> eight(T, 8);
  layouts(0, eight, /*back=*/false);
  sbuf_.resize(stotal_), rbuf_.resize(rtotal_);
  // The ids this rank sends itself skip the exchange (copied straight from
  // the plan below); at world 1 nothing is exchanged.
  std::vector<const unsigned char *> from(world_);
  for (int p = 0; p < world_; ++p)
    if (p != rank_) {
      if (T) put_ids(p, sbuf_.data() + sat(p, 0));
      from[p] = rbuf_.data() + (T ? rat(p, 0) : 0);
    }
  if (world_ > 1)
    exchange();
  else
    count_round();
  take_ids(from);
}

bool Collection::route_with_header(const int64_t *headers, size_t k,
                                   const Outcome &o, int op, const char *what,
                                   std::optional<timeline::Span> &phase) {
  if (world_ == 1 || !x_->sized_in_one_round()) return false;
  phase.emplace("emb.ids", "embedding");
  // Per peer: its header, then (this rank planned) its ids table after
  // table; this rank's own share stays in place (no block).
  const size_t H = k * 8;
  const bool ok = o.status == HB_OK;
  sb_.assign(world_, 0);
  stotal_ = 0;
  for (int p = 0; p < world_; ++p) {
    if (p == rank_) continue;
    int64_t b = static_cast<int64_t>(H);
    for (const StepPlan &pl : plans_)
      if (ok) b += pl.send_counts()[p] * 8;
    sb_[p] = b;
    stotal_ += b;
  }
  sbuf_.resize(stotal_);
  unsigned char *at = sbuf_.data();
  for (int p = 0; p < world_; ++p) {
    if (p == rank_) continue;
    std::memcpy(at, headers + p * k, H);
    if (ok) put_ids(p, at + H);
    at += sb_[p];
  }
  // Each peer's block, read in place (valid until the exchange's next
  // call, after take_ids).
  std::vector<int64_t> h(headers, headers + k * world_);
  std::vector<const unsigned char *> from(world_);
  std::vector<size_t> got(world_, 0);
  x_->alltoallv_sized(sbuf_.data(), sb_.data(),
                      [&](int p, const char *data, size_t bytes) {
                        if (p == rank_) return;
                        got[p] = bytes;
                        from[p] = reinterpret_cast<const unsigned char *>(data);
                      });
  ++stats_.rounds;
  for (int p = 0; p < world_; ++p) {
    if (p == rank_) continue;
    stats_.wire_bytes_sent += sb_[p];
    stats_.wire_bytes_recv += got[p];
    // Another call's block may be shorter than a header: a mismatch the
    // header check names (rank p made a different call), as in two rounds.
    if (got[p] < H)
      fail(HB_ERR_MISMATCH,
           "%s: rank %d made a different call (it sent %zu bytes, less than "
           "a header)",
           what, p, got[p]);
    std::memcpy(&h[p * k], from[p], H);
    from[p] += H;  // its ids
  }
  take_headers(h.data(), k, o, op, what);
  for (int p = 0; p < world_; ++p) {
    if (p == rank_) continue;
    size_t want = H;
    for (const StepPlan &pl : plans_) want += pl.recv_counts()[p] * 8;
    if (got[p] != want)
      fail(HB_ERR_INTERNAL, "%s: rank %d sent %zu bytes, its header says %zu",
           what, p, got[p], want);
  }
  take_ids(from);
  return true;
}

void Collection::take_ids(const std::vector<const unsigned char *> &from) {
  std::vector<const unsigned char *> &at = take_at_;
  at.assign(from.begin(), from.end());
  std::vector<const int64_t *> &blocks = take_blocks_;
  blocks.resize(world_);
  for (size_t t = 0; t < tables_.size(); ++t) {
    Slot &s = slots_[t];
    StepPlan &pl = plans_[t];
    if (world_ == 1) {
      // What this rank receives is what it sends: read the plan's ids.
      s.recv = pl.send_ids().data();
      s.nrecv = pl.send_ids().size();
      s.owner_nu = pl.owner_dedup(s.recv, s.nrecv);
    } else {
      // Each source's ids where they are: this rank's own in its plan, the
      // peers' in the exchange's blocks.
      bool aligned = true;
      for (int p = 0; p < world_; ++p) {
        const unsigned char *b =
            p == rank_ ? reinterpret_cast<const unsigned char *>(
                             pl.send_ids().data() + send_at(pl, p))
                       : at[p];
        aligned &= reinterpret_cast<uintptr_t>(b) % alignof(int64_t) == 0;
        blocks[p] = reinterpret_cast<const int64_t *>(b);
        if (p != rank_) at[p] += pl.recv_counts()[p] * 8;
      }
      s.nrecv = static_cast<size_t>(pl.recv_total());
      s.recv = nullptr;
      // Packed into recv_ids where something reads them as one array
      // later (one source) or they cannot be read as int64 in place.
      auto pack = [&] {
        s.recv_ids.resize(s.nrecv);
        int64_t to = 0;
        for (int p = 0; p < world_; ++p) {
          const int64_t c = pl.recv_counts()[p];
          if (c) std::memcpy(s.recv_ids.data() + to, blocks[p], c * 8);
          blocks[p] = s.recv_ids.data() + to;
          to += c;
        }
        s.recv = s.recv_ids.data();
      };
      // Several sources: the owner dedups the blocks in place (no copy
      // into recv_ids), and what reads the ids later reads its unique():
      // the blocks do not outlive the exchange's next call (a pipelined
      // lookup's rows round comes after an update's rounds).
      if (!aligned || pl.sources() <= 1) pack();
      s.owner_nu = pl.owner_dedup(blocks.data());
    }
    stats_.owner_unique += s.owner_nu >= 0 ? s.owner_nu : s.nrecv;
    stats_.unique_ids += pl.local().unique().size();
    stats_.dedup_bound_bytes += pl.remote_sent() * 8;
  }
}

void Collection::rows_and_pool(const JaggedBatch &in, float *out,
                               float *const *unpooled) {
  // Owners: the rows of what they received, back per peer table after
  // table.
  std::optional<timeline::Span> phase;
  phase.emplace("emb.rows", "embedding");
  const size_t T = tables_.size();
  layouts(0, row_bytes_, /*back=*/true);
  std::vector<OwnerCall> calls(batch_ ? T : 0);
  for (size_t t = 0; t < T; ++t) {
    Slot &s = slots_[t];
    if (rows_in_place(t)) continue;  // pooled from the shard below
    s.wire.resize(s.nrecv * row_bytes_[t]);
    if (batch_)
      calls[t] = {tables_[t],         s.recv,        s.nrecv, s.owner_nu,
                  &plans_[t].owner(), s.wire.data(), nullptr};
  }
  if (batch_) batch_->encode_rows(calls);
  // At world 1 with float32 rows the owner writes them straight into the
  // partial rows (received order = send order there): one copy, not four.
  // Elsewhere a table that holds its rows writes each peer's straight into
  // the exchange's block for it (on the call board: this rank's slot), and
  // this rank's own share skips the exchange.
  auto pieces = [&](size_t t) {
    return !batch_ && world_ > 1 && tables_[t]->holds_rows();
  };
  for (size_t t = 0; t < T; ++t) {
    Slot &s = slots_[t];
    const StepPlan &pl = plans_[t];
    if (rows_in_place(t)) continue;
    if (!batch_ && direct_rows(t)) {
      s.partial.resize(pl.send_ids().size() * tables_[t]->spec().dim);
      tables_[t]->encode_rows(
          s.recv, s.nrecv, s.owner_nu, pl.owner(),
          reinterpret_cast<unsigned char *>(s.partial.data()));
      continue;
    }
    if (pieces(t))
      tables_[t]->find_rows(s.recv, s.nrecv, s.owner_nu, pl.owner());
    else if (!batch_)
      tables_[t]->encode_rows(s.recv, s.nrecv, s.owner_nu, pl.owner(),
                              s.wire.data());
    stats_.dedup_bound_bytes += pl.remote_sent() * row_bytes_[t];
    s.partial.resize(pl.send_ids().size() * tables_[t]->spec().dim);
  }
  // Table t's rows from rank p (received order: recv_at) at dst.
  auto put = [&](int p, size_t t, unsigned char *dst) {
    const StepPlan &pl = plans_[t];
    const size_t rbt = row_bytes_[t];
    const int64_t c = pl.recv_counts()[p];
    if (pieces(t))
      tables_[t]->encode_found(recv_at(pl, p), c, dst);
    else if (c)
      std::memcpy(dst, slots_[t].wire.data() + recv_at(pl, p) * rbt, c * rbt);
  };
  // Requester: each table's rows in send order (decoded from the peers'
  // blocks as they arrive), then pooled per feature.
  auto decode = [&](int p, size_t t, const unsigned char *src) {
    const Spec &sp = tables_[t]->spec();
    const StepPlan &pl = plans_[t];
    wire_decode(src, pl.send_counts()[p] * sp.dim, sp.wire_dtype,
                slots_[t].partial.data() + send_at(pl, p) * sp.dim);
  };
  if (world_ > 1)
    exchange(
        [&](int p, unsigned char *dst) {
          for (size_t t = 0; t < T; ++t) put(p, t, dst + sin_block(p, t));
        },
        [&](int p, const unsigned char *block) {
          for (size_t t = 0; t < T; ++t) decode(p, t, block + rin_block(p, t));
        });
  else
    count_round();
  // This rank's own share: float32 rows found in pieces go straight into
  // the partial rows (they are the decoded rows); others through the wire
  // buffer (the bytes the exchange would have carried).
  for (size_t t = 0; t < T; ++t) {
    if (!batch_ && direct_rows(t)) continue;
    const StepPlan &pl = plans_[t];
    const Spec &sp = tables_[t]->spec();
    unsigned char *wire =
        slots_[t].wire.data() + recv_at(pl, rank_) * row_bytes_[t];
    if (pieces(t) && sp.wire_dtype == HB_FLOAT32) {
      put(rank_, t,
          reinterpret_cast<unsigned char *>(slots_[t].partial.data() +
                                            send_at(pl, rank_) * sp.dim));
      continue;
    }
    if (pieces(t)) put(rank_, t, wire);
    decode(rank_, t, wire);
  }
  phase.emplace("emb.pool", "embedding");
  for (size_t f = 0; f < features_.size(); ++f) {
    const size_t t = slot_of_[f];
    const Bags &g = bags_[f];
    const int64_t dim = tables_[t]->spec().dim;
    const int32_t pooling = features_[f].pooling;
    const bool none = pooling == HB_POOLING_NONE;
    if (none ? n_[f] == 0 : in.batch == 0) continue;  // out may be NULL
    float *o = none ? unpooled[f] : out + column_[f];
    const size_t n = n_[f];
    with_row_ops(dim, [&](auto ops) {
      constexpr int kD = decltype(ops)::kWidth;
      const int64_t d = kD > 0 ? kD : dim;
      if (!rows_in_place(t)) {
        const float *rows = slots_[t].partial.data();
        const uint32_t *inv = plans_[t].local().inverse().data() + start_[f];
        const uint32_t *pos = plans_[t].pos().data();
        ops.pool(
            dim, [=](size_t k) { return rows + pos[inv[k]] * d; }, g.w,
            g.bag.data(), in.batch, n, pooling, o, pooled_width_, g.one);
        return;
      }
      // World 1: id k's record is the shard's record k (a local index is
      // the id), its weights first: no gather, no copy, the same floats.
      const float *rec = tables_[t]->records_in_place();
      const int64_t words = tables_[t]->shard().record_words();
      const int64_t *ids = slots_[t].ids.data() + start_[f];
      if (!prefetch_rows(t)) {
        ops.pool(
            dim, [=](size_t k) { return rec + ids[k] * words; }, g.w,
            g.bag.data(), in.batch, n, pooling, o, pooled_width_, g.one);
        return;
      }
      // Rows spread over more than the cache: each id's row is a memory
      // access; start the one kPoolAhead ids on (its first and last
      // weight when a row may straddle a cache line; records that start
      // on lines and rows that fit in one need one prefetch).
      auto prefetched = [&](auto last) {
        ops.pool(
            dim,
            [=](size_t k) {
              const float *a =
                  rec + ids[std::min(k + kPoolAhead, n - 1)] * words;
              __builtin_prefetch(a);
              if (decltype(last)::value) __builtin_prefetch(a + d - 1);
              return rec + ids[k] * words;
            },
            g.w, g.bag.data(), in.batch, n, pooling, o, pooled_width_, g.one);
      };
      const bool on_lines = reinterpret_cast<uintptr_t>(rec) % 64 == 0 &&
                            words * 4 % 64 == 0 && d * 4 <= 64;
      if (d > 1 && !on_lines)
        prefetched(std::true_type());
      else
        prefetched(std::false_type());
    });
  }
}

bool Collection::rows_in_place(size_t t) const {
  return !batch_ && direct_rows(t) && tables_[t]->records_in_place();
}

bool Collection::prefetch_rows(size_t t) const {
  const Spec &sp = tables_[t]->spec();
  return static_cast<uint64_t>(sp.num_rows) *
             static_cast<uint64_t>(tables_[t]->shard().record_words()) * 4 >
         kPoolPrefetchBytes;
}

bool Collection::direct_rows(size_t t) const {
  return world_ == 1 && tables_[t]->spec().wire_dtype == HB_FLOAT32;
}

int64_t Collection::send_at(const StepPlan &pl, int rank) {
  int64_t at = 0;
  for (int p = 0; p < rank; ++p) at += pl.send_counts()[p];
  return at;
}

int64_t Collection::recv_at(const StepPlan &pl, int rank) {
  int64_t at = 0;
  for (int p = 0; p < rank; ++p) at += pl.recv_counts()[p];
  return at;
}

bool Collection::same_ids() {
  std::vector<size_t> total(tables_.size(), 0);
  for (size_t f = 0; f < features_.size(); ++f) {
    const Slot &s = slots_[slot_of_[f]];
    const size_t n = n_[f];
    total[slot_of_[f]] += n;
    if (start_[f] + n > s.ids.size() ||
        (n && std::memcmp(bags_[f].ids, &s.ids[start_[f]], n * 8)))
      return false;
  }
  for (size_t t = 0; t < tables_.size(); ++t)
    if (total[t] != slots_[t].ids.size()) return false;
  return true;
}

void Collection::expand_grads(const float *grad_out,
                              const float *const *grad_unpooled) {
  // Partial sums per unique id, in send order (the table's contract: first
  // occurrence, then += in batch order), straight from the gradients.
  for (size_t t = 0; t < tables_.size(); ++t) {
    Slot &s = slots_[t];
    const int64_t dim = tables_[t]->spec().dim;
    const StepPlan &pl = plans_[t];
    s.partial.resize(pl.send_ids().size() * dim);
    uint32_t next = 0;
    for (size_t f : slot_features_[t]) {
      const Bags &g = bags_[f];
      const int32_t pooling = features_[f].pooling;
      const bool none = pooling == HB_POOLING_NONE;
      if (none ? n_[f] == 0 : g.bag.size() == 1) continue;  // may be NULL
      with_row_ops(dim, [&](auto ops) {
        ops.expand(
            dim, none ? grad_unpooled[f] : grad_out + column_[f], pooled_width_,
            g.w, g.bag.data(), static_cast<int64_t>(g.bag.size()) - 1, n_[f],
            pooling, g.one, pl.local().inverse().data() + start_[f],
            world_ == 1 ? nullptr : pl.pos().data(), &next, s.partial.data());
      });
    }
  }
}

bool Collection::send_partials(Outcome &o, bool reuse, const char *what) {
  // Per peer: {status, reuse verdict, call id}, then the partial sums
  // table after table.
  std::optional<timeline::Span> phase;
  phase.emplace("emb.grads", "embedding");
  const size_t T = tables_.size();
  const size_t H = kVerdictWords * 8;
  // The dense floats ride at the end of every peer's block, whole to every
  // peer: each rank then folds all of them in rank order, as hb_allreduce's
  // one-round form does.
  const size_t D = dense_count_ * 4;
  layouts(H, row_bytes_, /*back=*/false, D);
  const bool ok = o.status == HB_OK && reuse;
  int64_t h[kVerdictWords];
  verdict(o, ok, h);
  // The owner side's buffers, filled from the peers' blocks as they
  // arrive (only used when every rank's verdict is OK).
  for (size_t t = 0; t < T; ++t)
    if (batch_ || !direct_rows(t))
      slots_[t].wire.resize(slots_[t].nrecv * row_bytes_[t]);
  dense_in_.resize(dense_count_ * world_);
  std::vector<int64_t> hv(world_ * kVerdictWords);
  std::memcpy(&hv[rank_ * kVerdictWords], h, H);
  if (ok)
    for (size_t t = 0; t < T; ++t)
      stats_.dedup_bound_bytes += plans_[t].remote_sent() * row_bytes_[t];
  if (world_ > 1) {
    // This rank's own partial sums skip the exchange (encoded straight into
    // the owner's wire buffer below); the peers' are encoded straight into
    // the exchange's blocks (on the call board: this rank's slot).
    auto fill = [&](int p, unsigned char *dst) {
      std::memcpy(dst, h, H);
      if (!ok) return;
      if (D) std::memcpy(dst + sb_[p] - D, dense_.send, D);
      for (size_t t = 0; t < T; ++t) {
        const StepPlan &pl = plans_[t];
        const Spec &sp = tables_[t]->spec();
        wire_encode(slots_[t].partial.data() + send_at(pl, p) * sp.dim,
                    pl.send_counts()[p] * sp.dim, sp.wire_dtype,
                    dst + sin_block(p, t));
      }
    };
    auto deliver = [&](int p, const unsigned char *block) {
      std::memcpy(&hv[p * kVerdictWords], block, H);
      for (size_t t = 0; t < T; ++t) {
        const StepPlan &pl = plans_[t];
        const size_t rbt = row_bytes_[t];
        if (const int64_t c = pl.recv_counts()[p])
          std::memcpy(slots_[t].wire.data() + recv_at(pl, p) * rbt,
                      block + rin_block(p, t), c * rbt);
      }
      if (D) std::memcpy(&dense_in_[p * dense_count_], block + rb_[p] - D, D);
    };
    try {
      exchange(fill, deliver);
    } catch (const Error &e) {
      // Ranks that pass different dense counts post blocks of different
      // sizes: the exchange's call check fails them all with
      // HB_ERR_MISMATCH. Say which count this rank passed.
      if (e.status() != HB_ERR_MISMATCH || !dense_call_) throw;
      fail(HB_ERR_MISMATCH,
           "%s: the partial-sums round failed (this rank sums %zu dense "
           "floats: every rank must pass the same dense count, or none): %s",
           what, dense_count_, e.what());
    }
  } else {
    count_round();
  }
  if (!verdicts(hv.data(), o, what)) return false;
  // Owners: one optimizer step per unique id.
  phase.emplace("emb.optimizer", "embedding");
  std::vector<OwnerCall> calls(batch_ ? T : 0);
  for (size_t t = 0; t < T; ++t) {
    Slot &s = slots_[t];
    const StepPlan &pl = plans_[t];
    const size_t rbt = row_bytes_[t];
    if (!batch_ && direct_rows(t)) {
      tables_[t]->apply_rows(s.recv, s.nrecv, s.owner_nu, pl.owner(),
                             s.partial.data());
      continue;
    }
    const Spec &sp = tables_[t]->spec();
    wire_encode(s.partial.data() + send_at(pl, rank_) * sp.dim,
                pl.recv_counts()[rank_] * sp.dim, sp.wire_dtype,
                s.wire.data() + recv_at(pl, rank_) * rbt);
    if (batch_)
      calls[t] = {tables_[t],  s.recv,  s.nrecv,      s.owner_nu,
                  &pl.owner(), nullptr, s.wire.data()};
    else
      tables_[t]->apply_received(s.recv, s.nrecv, s.owner_nu, pl.owner(),
                                 s.wire.data());
  }
  if (batch_) batch_->apply_received(calls);
  sum_dense();
  return true;
}

void Collection::sum_dense() {
  const size_t n = dense_count_, D = n * 4;
  if (n == 0) return;
  if (world_ == 1) {  // hb_allreduce's sum over one rank: a copy
    if (dense_.recv != dense_.send) std::memmove(dense_.recv, dense_.send, D);
    return;
  }
  // This rank's input is the caller's send (it may be recv itself); the
  // peers' are their copies in dense_in_, which the fold may use as its
  // accumulator (so recv may be this rank's input).
  std::vector<const char *> in(world_);
  for (int p = 0; p < world_; ++p)
    in[p] = reinterpret_cast<const char *>(
        p == rank_ ? dense_.send : dense_in_.data() + p * n);
  // hb_allreduce's own fold and kernels (comm/rank_order.h): rank order per
  // element, ((x0 + x1) + x2) + ..., so the same bits at any world size.
  const comm::OpKernels k = comm::op_kernels(HB_FLOAT32, HB_SUM);
  const comm::RankOrderOp op{sizeof(float), k.acc, k.combine};
  comm::fold_in_rank_order(op, world_, rank_, in.data(),
                           reinterpret_cast<char *>(dense_.recv), n);
}

}  // namespace emb
}  // namespace hb
