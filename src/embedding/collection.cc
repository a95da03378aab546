#include "embedding/collection.h"

#include <cmath>
#include <cstring>
#include <optional>

#include "abi/error.h"
#include "embedding/wire.h"
#include "timeline/timeline.h"

namespace hb {
namespace emb {
namespace {

enum Op : int64_t { kLookup = 1, kUpdate = 2 };

const char *op_name(int64_t op) {
  return op == kLookup   ? "hb_collection_lookup"
         : op == kUpdate ? "hb_collection_apply_gradients"
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

uint64_t mix(uint64_t h, uint64_t v) {
  return (h ^ v) * 0x100000001b3ull + (h >> 29);
}

}  // namespace

Collection::Collection(std::vector<Feature> features,
                       std::unique_ptr<Exchange> x)
    : features_(std::move(features)),
      x_(std::move(x)),
      rank_(x_->rank()),
      world_(x_->world()) {
  const char *what = "hb_collection_create";
  Outcome o;
  uint64_t fp = 0xcbf29ce484222325ull;
  try {
    HB_CHECK_ARG(!features_.empty(), "%s: no features", what);
    column_.assign(features_.size(), -1);
    slot_of_.resize(features_.size());
    for (size_t f = 0; f < features_.size(); ++f) {
      Feature &ft = features_[f];
      if (ft.name.empty()) ft.name = "feature" + std::to_string(f);
      HB_CHECK_ARG(ft.table, "%s: feature %zu ('%s') has no table", what, f,
                   ft.name.c_str());
      const Spec &sp = ft.table->spec();
      if (sp.device >= 0)
        fail(HB_ERR_UNSUPPORTED,
             "%s: feature '%s': table '%s' lives on a GPU; collections take "
             "host tables only",
             what, ft.name.c_str(), sp.name.c_str());
      HB_CHECK_ARG(
          ft.pooling >= HB_POOLING_NONE && ft.pooling <= HB_POOLING_SQRTN,
          "%s: feature '%s': pooling %d is not an hb_pooling_code", what,
          ft.name.c_str(), ft.pooling);
      HB_CHECK_ARG(ft.table->exchange().world() == world_ &&
                       ft.table->exchange().rank() == rank_,
                   "%s: feature '%s': table '%s' is on another context", what,
                   ft.name.c_str(), sp.name.c_str());
      size_t s = 0;
      while (s < slots_.size() && slots_[s].table != ft.table) ++s;
      if (s == slots_.size()) {
        slots_.emplace_back(ft.table, rank_, world_);
        row_bytes_.push_back(ft.table->wire_row_bytes());
      }
      slots_[s].features.push_back(f);
      slot_of_[f] = s;
      if (ft.pooling != HB_POOLING_NONE) {
        column_[f] = pooled_width_;
        pooled_width_ += sp.dim;
      }
      fp = mix(fp, spec_fingerprint(sp));
      fp = mix(fp, fnv1a64(ft.name.data(), ft.name.size()));
      fp = mix(fp, static_cast<uint64_t>(ft.pooling) * 131 + s);
    }
    bags_.resize(features_.size());
    start_.resize(features_.size());
  } catch (...) {
    o.capture();
  }
  id_ = fp >> 1;  // positive as an int64 in messages
  std::vector<int64_t> got =
      agree(*x_, o, std::vector<int64_t>(world_, static_cast<int64_t>(id_)),
            what, nullptr);
  for (int p = 0; p < world_; ++p)
    if (got[p] != static_cast<int64_t>(id_))
      fail(HB_ERR_INVALID_ARGUMENT,
           "%s: rank %d passed different features (tables, order, names or "
           "pooling differ)",
           what, p);
}

void Collection::read_batch(const JaggedBatch &in, const char *what,
                            const void *pooled, const void *const *rows,
                            const char *pooled_name, const char *rows_name) {
  const int64_t B = in.batch;
  HB_CHECK_ARG(B >= 0, "%s: batch_size %lld < 0", what, (long long)B);
  HB_CHECK_ARG(B == 0 || in.offsets || in.lengths,
               "%s: offsets and lengths are both NULL", what);
  std::vector<size_t> next(slots_.size(), 0);
  for (size_t f = 0; f < features_.size(); ++f) {
    Bags &g = bags_[f];
    const char *name = features_[f].name.c_str();
    g.bag.assign(B + 1, 0);
    int64_t base = 0;
    if (B > 0 && in.offsets) {
      const int64_t *o = in.offsets[f];
      HB_CHECK_ARG(o, "%s: offsets of feature '%s' is NULL", what, name);
      HB_CHECK_ARG(o[0] >= 0, "%s: feature '%s': offsets[0] = %lld < 0", what,
                   name, (long long)o[0]);
      base = o[0];
      for (int64_t b = 0; b < B; ++b) {
        HB_CHECK_ARG(o[b + 1] >= o[b],
                     "%s: feature '%s': offsets decrease at sample %lld", what,
                     name, (long long)b);
        g.bag[b + 1] = o[b + 1] - base;
      }
    } else if (B > 0) {
      const int64_t *l = in.lengths[f];
      HB_CHECK_ARG(l, "%s: lengths of feature '%s' is NULL", what, name);
      for (int64_t b = 0; b < B; ++b) {
        HB_CHECK_ARG(l[b] >= 0 && l[b] < (int64_t{1} << 32),
                     "%s: feature '%s': length %lld at sample %lld", what, name,
                     (long long)l[b], (long long)b);
        g.bag[b + 1] = g.bag[b] + l[b];
      }
    }
    g.n = static_cast<size_t>(g.bag[B]);
    HB_CHECK_ARG(g.n < IdMap::kEmpty, "%s: feature '%s': %zu ids, too many",
                 what, name, g.n);
    g.ids = nullptr;
    g.w = nullptr;
    if (g.n) {
      HB_CHECK_ARG(in.ids && in.ids[f], "%s: ids of feature '%s' is NULL", what,
                   name);
      g.ids = in.ids[f] + base;
      if (in.weights && in.weights[f]) g.w = in.weights[f] + base;
    }
    size_t s = slot_of_[f];
    start_[f] = next[s];
    next[s] += g.n;
    HB_CHECK_ARG(next[s] < IdMap::kEmpty, "%s: table '%s': too many ids", what,
                 slots_[s].table->spec().name.c_str());
    stats_.ids += g.n;
    if (features_[f].pooling == HB_POOLING_NONE)
      HB_CHECK_ARG(g.n == 0 || (rows && rows[f]),
                   "%s: feature '%s' has pooling NONE and %s[%zu] is NULL",
                   what, name, rows_name, f);
  }
  HB_CHECK_ARG(B == 0 || pooled_width_ == 0 || pooled, "%s: %s is NULL", what,
               pooled_name);
}

void Collection::layouts(size_t header, const std::vector<size_t> &per_id,
                         bool back) {
  // Out along the plans: what this rank sends as a requester (send_counts)
  // and receives as an owner (recv_counts); back: the other way round.
  layout(header, per_id, !back, &sb_, &sat_, &sbuf_);
  layout(header, per_id, back, &rb_, &rat_, &rbuf_);
}

void Collection::layout(size_t header, const std::vector<size_t> &per_id,
                        bool sent, std::vector<int64_t> *bytes,
                        std::vector<int64_t> *at,
                        std::vector<unsigned char> *buf) const {
  const size_t T = slots_.size();
  bytes->assign(world_, 0);
  at->resize(world_ * (T + 1));
  int64_t off = 0;
  for (int p = 0; p < world_; ++p) {
    (*at)[p * (T + 1)] = off;
    int64_t b = static_cast<int64_t>(header);
    for (size_t t = 0; t < T; ++t) {
      (*at)[p * (T + 1) + 1 + t] = off + b;
      const StepPlan &pl = slots_[t].plan;
      b += (sent ? pl.send_counts()[p] : pl.recv_counts()[p]) *
           static_cast<int64_t>(per_id[t]);
    }
    (*bytes)[p] = b;
    off += b;
  }
  buf->resize(off);
}

void Collection::exchange(const void *send, const std::vector<int64_t> &sb,
                          void *recv, const std::vector<int64_t> &rb) {
  ++stats_.rounds;
  for (int p = 0; p < world_; ++p)
    if (p != rank_) {
      stats_.wire_bytes_sent += sb[p];
      stats_.wire_bytes_recv += rb[p];
    }
  x_->alltoallv(send, sb.data(), recv, rb.data());
}

void Collection::plan_and_route(Outcome &o, int op, const char *what) {
  const size_t T = slots_.size();
  // One timeline span per phase (a new one ends the last).
  std::optional<timeline::Span> phase;
  phase.emplace("emb.plan", "embedding");
  if (o.status == HB_OK) {
    try {
      for (Slot &s : slots_) {
        s.ids.clear();
        for (size_t f : s.features)
          s.ids.insert(s.ids.end(), bags_[f].ids, bags_[f].ids + bags_[f].n);
        s.plan.prepare(s.ids.data(), s.ids.size(), s.ids.data(), what);
      }
    } catch (...) {
      o.capture();
      for (Slot &s : slots_)
        if (s.plan.bad_id()) {
          o.has_detail = true;
          o.detail = *s.plan.bad_id();
        }
    }
  }
  // One header per peer: {status, has_detail, detail, call id, counts}.
  phase.emplace("emb.header", "embedding");
  const CallId me{static_cast<int64_t>(id_), op, static_cast<int64_t>(seq_)};
  const size_t k = 6 + T;
  std::vector<int64_t> send(k * world_, 0), recv(k * world_);
  for (int p = 0; p < world_; ++p) {
    int64_t *h = &send[p * k];
    h[0] = o.status, h[1] = o.has_detail, h[2] = o.detail;
    h[3] = me.coll, h[4] = me.op, h[5] = me.seq;
    if (o.status == HB_OK)
      for (size_t t = 0; t < T; ++t) h[6 + t] = slots_[t].plan.send_counts()[p];
  }
  ++stats_.rounds;
  stats_.wire_bytes_sent += k * 8 * (world_ - 1);
  stats_.wire_bytes_recv += k * 8 * (world_ - 1);
  x_->alltoall(send.data(), recv.data(), k);
  if (o.status != HB_OK) throw Error(o.status, o.message);
  for (int p = 0; p < world_; ++p) check_peer_status(&recv[p * k], p, what);
  for (int p = 0; p < world_; ++p) check_call(me, &recv[p * k + 3], p, what);
  for (size_t t = 0; t < T; ++t) {
    std::vector<int64_t> rc(world_);
    for (int p = 0; p < world_; ++p) rc[p] = recv[p * k + 6 + t];
    slots_[t].plan.set_recv_counts(std::move(rc));
  }

  // The ids, per peer table after table.
  phase.emplace("emb.ids", "embedding");
  std::vector<size_t> eight(T, 8);
  layouts(0, eight, /*back=*/false);
  for (size_t t = 0; t < T; ++t) {
    const StepPlan &pl = slots_[t].plan;
    int64_t from = 0;
    for (int p = 0; p < world_; ++p) {
      int64_t c = pl.send_counts()[p];
      if (c)
        std::memcpy(sbuf_.data() + (sat_[p * (T + 1) + 1 + t]),
                    pl.send_ids().data() + from, c * 8);
      from += c;
    }
  }
  exchange(sbuf_.data(), sb_, rbuf_.data(), rb_);
  for (size_t t = 0; t < T; ++t) {
    Slot &s = slots_[t];
    s.recv_ids.resize(s.plan.recv_total());
    int64_t to = 0;
    for (int p = 0; p < world_; ++p) {
      int64_t c = s.plan.recv_counts()[p];
      if (c)
        std::memcpy(s.recv_ids.data() + to,
                    rbuf_.data() + (rat_[p * (T + 1) + 1 + t]), c * 8);
      to += c;
    }
    // The owner's dedup (part of the ids phase on the timeline).
    s.owner_nu = s.plan.owner_dedup(s.recv_ids.data(), s.recv_ids.size());
    stats_.owner_unique += s.owner_nu >= 0 ? s.owner_nu : s.recv_ids.size();
    stats_.unique_ids += s.plan.local().unique().size();
    stats_.dedup_bound_bytes += s.plan.remote_sent() * 8;
  }
}

void Collection::lookup(const JaggedBatch &in, float *out,
                        float *const *unpooled) {
  const char *what = "hb_collection_lookup";
  ++seq_;
  ++stats_.lookups;
  plan_valid_ = false;
  Outcome o;
  try {
    read_batch(in, what, out, reinterpret_cast<const void *const *>(unpooled),
               "out", "unpooled");
  } catch (...) {
    o.capture();
  }
  plan_and_route(o, kLookup, what);

  // Owners: the rows of what they received, back per peer table after
  // table.
  std::optional<timeline::Span> phase;
  phase.emplace("emb.rows", "embedding");
  const size_t T = slots_.size();
  layouts(0, row_bytes_, /*back=*/true);
  for (size_t t = 0; t < T; ++t) {
    Slot &s = slots_[t];
    const size_t rbt = row_bytes_[t];
    s.wire.resize(s.recv_ids.size() * rbt);
    s.table->encode_rows(s.recv_ids.data(), s.recv_ids.size(), s.owner_nu,
                         s.plan.owner(), s.wire.data());
    int64_t from = 0;
    for (int p = 0; p < world_; ++p) {
      int64_t c = s.plan.recv_counts()[p];
      if (c)
        std::memcpy(sbuf_.data() + (sat_[p * (T + 1) + 1 + t]),
                    s.wire.data() + from * rbt, c * rbt);
      from += c;
    }
    stats_.dedup_bound_bytes += s.plan.remote_sent() * rbt;
  }
  exchange(sbuf_.data(), sb_, rbuf_.data(), rb_);

  // Requester: each table's rows in send order, then pooled per feature.
  phase.emplace("emb.pool", "embedding");
  for (size_t t = 0; t < T; ++t) {
    Slot &s = slots_[t];
    const int64_t dim = s.table->spec().dim;
    s.partial.resize(s.plan.send_ids().size() * dim);
    int64_t from = 0;
    for (int p = 0; p < world_; ++p) {
      int64_t c = s.plan.send_counts()[p];
      wire_decode(rbuf_.data() + (rat_[p * (T + 1) + 1 + t]), c * dim,
                  s.table->spec().wire_dtype, s.partial.data() + from * dim);
      from += c;
    }
  }
  const int64_t B = in.batch;
  for (size_t f = 0; f < features_.size(); ++f) {
    const Slot &s = slots_[slot_of_[f]];
    const Bags &g = bags_[f];
    const int64_t dim = s.table->spec().dim;
    const uint32_t *inv = s.plan.local().inverse().data() + start_[f];
    const uint32_t *pos = s.plan.pos().data();
    auto row = [&](size_t k) { return &s.partial[pos[inv[k]] * dim]; };
    const int32_t pooling = features_[f].pooling;
    if (pooling == HB_POOLING_NONE) {
      for (size_t k = 0; k < g.n; ++k) {
        const float *r = row(k);
        float *o = unpooled[f] + k * dim;
        if (g.w)
          for (int64_t c = 0; c < dim; ++c) o[c] = g.w[k] * r[c];
        else
          for (int64_t c = 0; c < dim; ++c) o[c] = r[c];
      }
      continue;
    }
    for (int64_t b = 0; b < B; ++b) {
      float *o = out + b * pooled_width_ + column_[f];
      const int64_t lo = g.bag[b], hi = g.bag[b + 1];
      if (lo == hi) {
        std::memset(o, 0, dim * 4);
        continue;
      }
      for (int64_t k = lo; k < hi; ++k) {
        const float *r = row(k);
        if (k == lo && g.w)
          for (int64_t c = 0; c < dim; ++c) o[c] = g.w[k] * r[c];
        else if (k == lo)
          for (int64_t c = 0; c < dim; ++c) o[c] = r[c];
        else if (g.w)
          for (int64_t c = 0; c < dim; ++c) o[c] += g.w[k] * r[c];
        else
          for (int64_t c = 0; c < dim; ++c) o[c] += r[c];
      }
      if (pooling == HB_POOLING_SUM) continue;
      const float d = pooling == HB_POOLING_MEAN
                          ? static_cast<float>(hi - lo)
                          : std::sqrt(static_cast<float>(hi - lo));
      for (int64_t c = 0; c < dim; ++c) o[c] /= d;
    }
  }
  plan_valid_ = true;
}

void Collection::expand_grads(Slot &s, const float *grad_out,
                              const float *const *grad_unpooled) {
  const int64_t dim = s.table->spec().dim;
  s.rows.resize(s.ids.size() * dim);
  for (size_t f : s.features) {
    const Bags &g = bags_[f];
    float *G = s.rows.data() + start_[f] * dim;
    const int32_t pooling = features_[f].pooling;
    if (pooling == HB_POOLING_NONE) {
      const float *src = grad_unpooled[f];
      if (!g.w) {
        if (g.n) std::memcpy(G, src, g.n * dim * 4);
        continue;
      }
      for (size_t k = 0; k < g.n; ++k)
        for (int64_t c = 0; c < dim; ++c)
          G[k * dim + c] = src[k * dim + c] * g.w[k];
      continue;
    }
    const int64_t B = static_cast<int64_t>(g.bag.size()) - 1;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t lo = g.bag[b], hi = g.bag[b + 1];
      if (lo == hi) continue;
      const float *src = grad_out + b * pooled_width_ + column_[f];
      const float d = pooling == HB_POOLING_MEAN
                          ? static_cast<float>(hi - lo)
                          : std::sqrt(static_cast<float>(hi - lo));
      for (int64_t k = lo; k < hi; ++k) {
        float *o = G + k * dim;
        if (pooling == HB_POOLING_SUM && !g.w) {
          for (int64_t c = 0; c < dim; ++c) o[c] = src[c];
          continue;
        }
        float sc = g.w ? g.w[k] : 1.0f;
        if (pooling != HB_POOLING_SUM) sc = sc / d;
        for (int64_t c = 0; c < dim; ++c) o[c] = src[c] * sc;
      }
    }
  }
  // Partial sums per unique id, in send order (the table's contract:
  // first occurrence, then += in batch order).
  s.partial.resize(s.plan.send_ids().size() * dim);
  sum_rows(s.rows.data(), s.ids.size(), s.plan.local().inverse().data(),
           s.plan.pos().data(), dim, s.partial.data());
}

bool Collection::send_partials(Outcome &o, bool reuse, const char *what) {
  // Per peer: {status, reuse verdict, call id}, then the partial sums
  // table after table.
  std::optional<timeline::Span> phase;
  phase.emplace("emb.grads", "embedding");
  const size_t T = slots_.size();
  const size_t H = 5 * 8;
  layouts(H, row_bytes_, /*back=*/false);
  const CallId me{static_cast<int64_t>(id_), kUpdate,
                  static_cast<int64_t>(seq_)};
  const bool ok = o.status == HB_OK && reuse;
  for (int p = 0; p < world_; ++p) {
    int64_t h[5] = {o.status, ok, me.coll, me.op, me.seq};
    std::memcpy(sbuf_.data() + (sat_[p * (T + 1)]), h, H);
  }
  if (ok)
    for (size_t t = 0; t < T; ++t) {
      const Slot &s = slots_[t];
      const int64_t dim = s.table->spec().dim;
      int64_t from = 0;
      for (int p = 0; p < world_; ++p) {
        int64_t c = s.plan.send_counts()[p];
        wire_encode(s.partial.data() + from * dim, c * dim,
                    s.table->spec().wire_dtype,
                    sbuf_.data() + (sat_[p * (T + 1) + 1 + t]));
        from += c;
      }
      stats_.dedup_bound_bytes += s.plan.remote_sent() * row_bytes_[t];
    }
  exchange(sbuf_.data(), sb_, rbuf_.data(), rb_);
  if (o.status != HB_OK) throw Error(o.status, o.message);
  bool all_ok = true;
  for (int p = 0; p < world_; ++p) {
    int64_t h[5];
    std::memcpy(h, rbuf_.data() + (rat_[p * (T + 1)]), H);
    int64_t st[3] = {h[0], 0, 0};
    check_peer_status(st, p, what);
    check_call(me, h + 2, p, what);
    all_ok = all_ok && h[1];
  }
  if (!all_ok) return false;
  // Owners: one optimizer step per unique id.
  phase.emplace("emb.optimizer", "embedding");
  for (size_t t = 0; t < T; ++t) {
    Slot &s = slots_[t];
    const size_t rbt = row_bytes_[t];
    s.wire.resize(s.recv_ids.size() * rbt);
    int64_t to = 0;
    for (int p = 0; p < world_; ++p) {
      int64_t c = s.plan.recv_counts()[p];
      if (c)
        std::memcpy(s.wire.data() + to * rbt,
                    rbuf_.data() + (rat_[p * (T + 1) + 1 + t]), c * rbt);
      to += c;
    }
    s.table->apply_received(s.recv_ids.data(), s.recv_ids.size(), s.owner_nu,
                            s.plan.owner(), s.wire.data());
  }
  return true;
}

void Collection::apply_gradients(const JaggedBatch &in, const float *grad_out,
                                 const float *const *grad_unpooled) {
  const char *what = "hb_collection_apply_gradients";
  ++seq_;
  ++stats_.updates;
  const bool speculate = plan_valid_;  // the same on every rank
  plan_valid_ = false;
  Outcome o;
  bool same = false;
  try {
    read_batch(in, what, grad_out,
               reinterpret_cast<const void *const *>(grad_unpooled), "grad_out",
               "grad_unpooled");
    if (speculate) {
      // Reuse only when this rank's ids equal its lookup's, exactly.
      same = true;
      std::vector<size_t> total(slots_.size(), 0);
      for (size_t f = 0; f < features_.size() && same; ++f) {
        const Slot &s = slots_[slot_of_[f]];
        const Bags &g = bags_[f];
        total[slot_of_[f]] += g.n;
        same = start_[f] + g.n <= s.ids.size() &&
               (g.n == 0 || !std::memcmp(g.ids, &s.ids[start_[f]], g.n * 8));
      }
      for (size_t t = 0; t < slots_.size() && same; ++t)
        same = total[t] == slots_[t].ids.size();
      if (same)
        for (Slot &s : slots_) expand_grads(s, grad_out, grad_unpooled);
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
  for (Slot &s : slots_) expand_grads(s, grad_out, grad_unpooled);
  if (!send_partials(o, true, what))
    fail(HB_ERR_INTERNAL, "%s: a fresh plan was refused", what);
}

}  // namespace emb
}  // namespace hb
