#include "embedding/table.h"

#include <cstring>
#include <optional>

#include "abi/error.h"
#include "embedding/dim_dispatch.h"
#include "embedding/wire.h"
#include "timeline/timeline.h"

namespace hb {
namespace emb {

Table::Table(const Spec &spec, std::unique_ptr<Exchange> exchange,
             const std::function<void()> &local_check, bool rows)
    : spec_(spec),
      x_(std::move(exchange)),
      rank_(x_->rank()),
      world_(x_->world()),
      wire_row_bytes_(wire_size(spec.wire_dtype) * spec.dim),
      plan_(spec, rank_, world_) {
  std::string what = "hb_embedding_create('" + spec.name + "')";
  Outcome o;
  o.sig.op = kCallCreate;  // the config itself is compared below
  try {
    if (local_check) local_check();
    if (rows) {
      shard_.reset(new Shard(spec_, rank_, world_));
      if (spec_.life.enabled) {
        meta_.reset(new lifecycle::RowMeta(shard_->slots(), true));
        shard_->set_meta(meta_.get());
        life_.reset(new lifecycle::Lifecycle(spec_, world_, *meta_));
      }
    }
  } catch (...) {
    o.capture();
  }
  // Where the rows live is not part of the spec (a checkpoint of a GPU
  // table loads into a host table), but the ranks must agree on it: the
  // two paths exchange differently.
  ConfigFields fields = spec_fields(spec_);
  fields.add("memory", spec_.device >= 0 ? "GPU" : "host");
  id_ = static_cast<int64_t>(fields.fingerprint());
  std::vector<int64_t> got =
      agree(*x_, o, std::vector<int64_t>(world_, id_), what.c_str(), nullptr);
  check_same_fields(
      fields, std::vector<uint64_t>(got.begin(), got.end()),
      [this](const std::string &s) { return gather_strings(*x_, s); },
      HB_ERR_INVALID_ARGUMENT, what, "configs");
}

void Table::replace_shard(std::unique_ptr<Shard> s) {
  shard_ = std::move(s);
  if (meta_) {
    meta_->on_load(shard_->slots());
    shard_->set_meta(meta_.get());
  }
  if (life_) life_->on_load();
}

lifecycle::RowMeta &Table::track_writes() {
  if (!meta_) {
    meta_.reset(new lifecycle::RowMeta(shard_->slots(), false));
    shard_->set_meta(meta_.get());
  }
  meta_->set_log_evictions(true);
  return *meta_;
}

void Table::exchange_payload(const void *send,
                             const std::vector<int64_t> &scount, void *recv,
                             const std::vector<int64_t> &rcount,
                             size_t elem_bytes) {
  std::vector<int64_t> sb(world_), rb(world_);
  for (int p = 0; p < world_; ++p) {
    sb[p] = scount[p] * static_cast<int64_t>(elem_bytes);
    rb[p] = rcount[p] * static_cast<int64_t>(elem_bytes);
    if (p != rank_) {
      stats_.wire_bytes_sent += sb[p];
      stats_.wire_bytes_recv += rb[p];
    }
  }
  x_->alltoallv(send, sb.data(), recv, rb.data());
}

void Table::route_ids(Outcome &o, const char *what) {
  plan_.agree_counts(*x_, o, what);
  stats_.wire_bytes_sent += 24 * (world_ - 1);
  stats_.wire_bytes_recv += 24 * (world_ - 1);
  recv_ids_.resize(plan_.recv_total());
  exchange_payload(plan_.send_ids().data(), plan_.send_counts(),
                   recv_ids_.data(), plan_.recv_counts(), 8);
}

int64_t Table::owner_dedup() {
  int64_t nu = plan_.owner_dedup(recv_ids_.data(), recv_ids_.size());
  if (nu >= 0) stats_.owner_unique += nu;
  return nu;
}

void Table::count_step(size_t n) {
  stats_.ids += n;
  stats_.request_bytes += plan_.remote_sent() * (8 + wire_row_bytes_);
  stats_.unique_ids += plan_.local().unique().size();
}

namespace {
// How many ids ahead the owner's loops prefetch their rows.
constexpr size_t kPrefetchAhead = 8;
}  // namespace

std::unique_ptr<OwnerBatch> Table::batch_with(const std::vector<Table *> &) {
  return nullptr;
}

void Table::encode_rows(const int64_t *recv, size_t nrecv, int64_t nu,
                        const Dedup &owner, unsigned char *dst) {
  find_rows(recv, nrecv, nu, owner);
  encode_found(0, nrecv, dst);
}

void Table::find_rows(const int64_t *recv, size_t nrecv, int64_t nu,
                      const Dedup &owner) {
  const int64_t dim = spec_.dim;
  // Each received id's row, or (owner dedup) each unique id's, in order:
  // dynamic rows are created in the order of the ids, whatever pieces
  // encode_found then writes first.
  const size_t m = nu < 0 ? nrecv : static_cast<size_t>(nu);
  const int64_t *u = nu < 0 ? recv : owner.unique().data();
  found_inv_ = nu < 0 ? nullptr : owner.inverse().data();
  rows_.resize(m);
  if (life_) {  // no row is created; missing ones read their default
    fdefault_.resize(m * dim);
    life_->begin_lookup();
    for (size_t k = 0; k < m; ++k)
      rows_[k] = life_->lookup_row(*shard_, u[k], fdefault_.data() + k * dim);
    return;
  }
  for (size_t k = 0; k < m; ++k) {
    if (k + kPrefetchAhead < m) shard_->prefetch(u[k + kPrefetchAhead]);
    rows_[k] = shard_->get(u[k]);
  }
}

void Table::encode_found(size_t from, size_t n, unsigned char *dst) const {
  const int64_t dim = spec_.dim;
  const hb_dtype wd = spec_.wire_dtype;
  const uint32_t *inv = found_inv_;
  // Float32 rows of a common width are copied with a constant length (no
  // memcpy call per row).
  with_dim(dim, [&](auto kdim) {
    constexpr int kD = decltype(kdim)::value;
    for (size_t j = 0; j < n; ++j) {
      const float *row = rows_[inv ? inv[from + j] : from + j];
      unsigned char *o = dst + j * wire_row_bytes_;
      if (kD > 0 && wd == HB_FLOAT32)
        std::memcpy(o, row, kD * 4);
      else
        wire_encode(row, dim, wd, o);
    }
  });
}

void Table::apply_received(const int64_t *recv, size_t nrecv, int64_t nu,
                           const Dedup &owner, const unsigned char *partials) {
  // Not virtual: an override of apply_rows may forward to apply_received
  // (PsTable's does).
  if (spec_.wire_dtype == HB_FLOAT32 &&
      reinterpret_cast<uintptr_t>(partials) % alignof(float) == 0) {
    // Float32 partial sums are already the rows: no decoded copy.
    Table::apply_rows(recv, nrecv, nu, owner,
                      reinterpret_cast<const float *>(partials));
    return;
  }
  fbuf2_.resize(nrecv * spec_.dim);
  wire_decode(partials, nrecv * spec_.dim, spec_.wire_dtype, fbuf2_.data());
  Table::apply_rows(recv, nrecv, nu, owner, fbuf2_.data());
}

void Table::apply_rows(const int64_t *recv, size_t nrecv, int64_t nu,
                       const Dedup &owner, const float *partials) {
  const int64_t dim = spec_.dim;
  if (nu < 0) {
    step_rows(recv, nrecv, partials);
    return;
  }
  // Sum the ranks' partial sums of each id in rank order: received data is
  // packed by source rank and each rank sent an id at most once.
  fbuf_.resize(nu * dim);
  sum_rows(partials, nrecv, owner.inverse().data(), nullptr, dim, fbuf_.data(),
           owner.leading_new());
  step_rows(owner.unique().data(), static_cast<size_t>(nu), fbuf_.data());
}

void Table::step_rows(const int64_t *ids, size_t n, const float *g) {
  const int64_t dim = spec_.dim;
  const Optimizer &opt = shard_->optimizer();
  if (life_) {
    life_->apply(*shard_, *x_, ids, n, g);
    return;
  }
  if (!meta_ && !spec_.dynamic()) {  // the common case: a static table
    Shard &sh = *shard_;
    opt.step_rows(
        n,
        // Inlined by force: GCC kept it out of line, a call per row.
        [&](size_t k) __attribute__((always_inline)) {
          if (k + kPrefetchAhead < n) sh.prefetch(ids[k + kPrefetchAhead]);
          return sh.static_record(ids[k]);
        },
        g);
    return;
  }
  if (!meta_) {  // dynamic: get() creates the rows on first touch
    Shard &sh = *shard_;
    opt.step_rows(
        n, [&](size_t k) { return sh.get(ids[k]); }, g);
    return;
  }
  for (size_t k = 0; k < n; ++k) {
    int64_t idx = shard_->index(ids[k]);
    opt.step(shard_->record_at(idx), g + k * dim);
    meta_->on_update(idx);
  }
}

void Table::lookup(const int64_t *ids, size_t n, float *out) {
  // One timeline span per phase (a new one ends the last).
  std::optional<timeline::Span> phase;
  phase.emplace("emb.plan", "embedding");
  Outcome o;
  o.sig = call(kCallLookup);
  try {
    plan_.prepare(ids, n, out, "hb_embedding_lookup");
  } catch (...) {
    o.capture();
  }
  phase.emplace("emb.ids", "embedding");
  route_ids(o, "hb_embedding_lookup");
  ++stats_.lookups;
  count_step(n);

  // Owner: the rows of every received id, in received order, wire dtype.
  phase.emplace("emb.rows", "embedding");
  wbuf_.resize(recv_ids_.size() * wire_row_bytes_);
  encode_rows(recv_ids_.data(), recv_ids_.size(), owner_dedup(), plan_.owner(),
              wbuf_.data());
  // Back to the requesters, in the order they sent the ids.
  wbuf2_.resize(plan_.send_ids().size() * wire_row_bytes_);
  exchange_payload(wbuf_.data(), plan_.recv_counts(), wbuf2_.data(),
                   plan_.send_counts(), wire_row_bytes_);
  const int64_t dim = spec_.dim;
  const hb_dtype wd = spec_.wire_dtype;
  const std::vector<uint32_t> &inv = plan_.local().inverse();
  const std::vector<uint32_t> &pos = plan_.pos();
  phase.emplace("emb.gather", "embedding");
  for (size_t i = 0; i < n; ++i)
    wire_decode(wbuf2_.data() + pos[inv[i]] * wire_row_bytes_, dim, wd,
                out + i * dim);
}

void Table::apply_gradients(const int64_t *ids, size_t n, const float *grads) {
  const int64_t dim = spec_.dim;
  const hb_dtype wd = spec_.wire_dtype;
  std::optional<timeline::Span> phase;
  phase.emplace("emb.plan", "embedding");
  Outcome o;
  o.sig = call(kCallApply);
  try {
    plan_.prepare(ids, n, grads, "hb_embedding_apply_gradients");
    // Local partial sums, in send order.
    const size_t nsend = plan_.send_ids().size();
    fbuf_.resize(nsend * dim);
    sum_rows(grads, n, plan_.local().inverse().data(), plan_.pos().data(), dim,
             fbuf_.data());
    wbuf_.resize(nsend * wire_row_bytes_);
    wire_encode(fbuf_.data(), fbuf_.size(), wd, wbuf_.data());
  } catch (...) {
    o.capture();
  }
  phase.emplace("emb.ids", "embedding");
  route_ids(o, "hb_embedding_apply_gradients");
  ++stats_.applies;
  count_step(n);

  phase.emplace("emb.grads", "embedding");
  const size_t nrecv = recv_ids_.size();
  wbuf2_.resize(nrecv * wire_row_bytes_);
  exchange_payload(wbuf_.data(), plan_.send_counts(), wbuf2_.data(),
                   plan_.recv_counts(), wire_row_bytes_);
  phase.emplace("emb.optimizer", "embedding");
  apply_received(recv_ids_.data(), nrecv, owner_dedup(), plan_.owner(),
                 wbuf2_.data());
}

}  // namespace emb
}  // namespace hb
