#include "embedding/table.h"

#include <cstring>

#include "abi/error.h"
#include "embedding/wire.h"

namespace hb {
namespace emb {

// dst[slot] = sum of the src rows i with inv[i] == u, slot = map ? map[u]
// : u, in increasing i: the first row is copied, later ones are added.
// inv numbers the ids in first-occurrence order (a Dedup's inverse).
static void sum_rows(const float *src, size_t n, const uint32_t *inv,
                     const uint32_t *map, int64_t dim, float *dst) {
  uint32_t next_new = 0;
  for (size_t i = 0; i < n; ++i) {
    float *d = dst + (map ? map[inv[i]] : inv[i]) * dim;
    const float *g = src + i * dim;
    if (inv[i] == next_new) {
      std::memcpy(d, g, dim * 4);
      ++next_new;
    } else {
      for (int64_t c = 0; c < dim; ++c) d[c] += g[c];
    }
  }
}

Table::Table(const Spec &spec, std::unique_ptr<Exchange> exchange)
    : spec_(spec),
      x_(std::move(exchange)),
      part_(spec, x_->world()),
      rank_(x_->rank()),
      world_(x_->world()),
      wire_row_bytes_(wire_size(spec.wire_dtype) * spec.dim) {
  std::string what = "hb_embedding_create('" + spec.name + "')";
  Outcome o;
  try {
    shard_.reset(new Shard(spec_, rank_, world_));
  } catch (...) {
    o.capture();
  }
  int64_t fp = static_cast<int64_t>(spec_fingerprint(spec_));
  std::vector<int64_t> got =
      agree(*x_, o, std::vector<int64_t>(world_, fp), what.c_str(), nullptr);
  for (int p = 0; p < world_; ++p)
    if (got[p] != fp)
      fail(HB_ERR_INVALID_ARGUMENT,
           "%s: rank %d passed a different config (name, dim, num_rows, "
           "partition, initializer, optimizer or wire dtype differ)",
           what.c_str(), p);
}

void Table::prepare(const int64_t *ids, size_t n, const void *data,
                    const char *what) {
  HB_CHECK_ARG(n == 0 || (ids && data),
               "%s('%s'): ids or %s is NULL with n = %zu", what,
               spec_.name.c_str(),
               std::strcmp(what, "hb_embedding_lookup") ? "grads" : "out", n);
  HB_CHECK_ARG(n < IdMap::kEmpty, "%s('%s'): n = %zu too large", what,
               spec_.name.c_str(), n);
  bad_id_.reset();
  dedup_.run(ids, n);
  const std::vector<int64_t> &u = dedup_.unique();
  if (!spec_.dynamic()) {
    for (int64_t id : u)
      if (id < 0 || id >= spec_.num_rows) {
        bad_id_ = id;
        fail(HB_ERR_INVALID_ARGUMENT, "%s('%s'): id %lld outside [0, %lld)",
             what, spec_.name.c_str(), (long long)id,
             (long long)spec_.num_rows);
      }
  }
  send_counts_.assign(world_, 0);
  pos_.resize(u.size());
  send_ids_.resize(u.size());
  if (world_ == 1) {
    for (size_t i = 0; i < u.size(); ++i) pos_[i] = static_cast<uint32_t>(i);
    if (!u.empty()) std::memcpy(send_ids_.data(), u.data(), u.size() * 8);
    send_counts_[0] = static_cast<int64_t>(u.size());
    return;
  }
  // Counting sort by owner, stable: each peer gets its ids in
  // first-occurrence order.
  for (int64_t id : u) ++send_counts_[part_.owner(id)];
  std::vector<int64_t> next(world_, 0);
  for (int p = 1; p < world_; ++p) next[p] = next[p - 1] + send_counts_[p - 1];
  for (size_t i = 0; i < u.size(); ++i) {
    int64_t at = next[part_.owner(u[i])]++;
    pos_[i] = static_cast<uint32_t>(at);
    send_ids_[at] = u[i];
  }
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
  if (bad_id_) {
    o.has_detail = true;
    o.detail = *bad_id_;
  }
  std::string w = std::string(what) + "('" + spec_.name + "')";
  recv_counts_ = agree(*x_, o, send_counts_, w.c_str(), "id");
  stats_.wire_bytes_sent += 24 * (world_ - 1);
  stats_.wire_bytes_recv += 24 * (world_ - 1);
  int64_t total = 0;
  for (int64_t c : recv_counts_) total += c;
  recv_ids_.resize(total);
  exchange_payload(send_ids_.data(), send_counts_, recv_ids_.data(),
                   recv_counts_, 8);
}

uint64_t Table::remote_sent() const {
  uint64_t n = 0;
  for (int p = 0; p < world_; ++p)
    if (p != rank_) n += static_cast<uint64_t>(send_counts_[p]);
  return n;
}

int64_t Table::owner_dedup() {
  int sources = 0;
  for (int64_t c : recv_counts_) sources += c > 0;
  if (sources <= 1) return -1;
  owner_dedup_.run(recv_ids_.data(), recv_ids_.size());
  stats_.owner_unique += owner_dedup_.unique().size();
  return static_cast<int64_t>(owner_dedup_.unique().size());
}

void Table::lookup(const int64_t *ids, size_t n, float *out) {
  Outcome o;
  try {
    prepare(ids, n, out, "hb_embedding_lookup");
  } catch (...) {
    o.capture();
  }
  route_ids(o, "hb_embedding_lookup");
  ++stats_.lookups;
  stats_.ids += n;
  stats_.request_bytes += remote_sent() * (8 + wire_row_bytes_);
  stats_.unique_ids += dedup_.unique().size();

  // Owner: the rows of every received id, in received order, wire dtype.
  const int64_t dim = spec_.dim;
  const hb_dtype wd = spec_.wire_dtype;
  const size_t nrecv = recv_ids_.size();
  wbuf_.resize(nrecv * wire_row_bytes_);
  int64_t nu = owner_dedup();
  if (nu < 0) {
    for (size_t j = 0; j < nrecv; ++j)
      wire_encode(shard_->get(recv_ids_[j]), dim, wd,
                  wbuf_.data() + j * wire_row_bytes_);
  } else {
    std::vector<const float *> rows(nu);
    for (int64_t k = 0; k < nu; ++k)
      rows[k] = shard_->get(owner_dedup_.unique()[k]);
    const std::vector<uint32_t> &inv = owner_dedup_.inverse();
    for (size_t j = 0; j < nrecv; ++j)
      wire_encode(rows[inv[j]], dim, wd, wbuf_.data() + j * wire_row_bytes_);
  }
  // Back to the requesters, in the order they sent the ids.
  wbuf2_.resize(send_ids_.size() * wire_row_bytes_);
  exchange_payload(wbuf_.data(), recv_counts_, wbuf2_.data(), send_counts_,
                   wire_row_bytes_);
  const std::vector<uint32_t> &inv = dedup_.inverse();
  for (size_t i = 0; i < n; ++i)
    wire_decode(wbuf2_.data() + pos_[inv[i]] * wire_row_bytes_, dim, wd,
                out + i * dim);
}

void Table::apply_gradients(const int64_t *ids, size_t n, const float *grads) {
  const int64_t dim = spec_.dim;
  const hb_dtype wd = spec_.wire_dtype;
  Outcome o;
  try {
    prepare(ids, n, grads, "hb_embedding_apply_gradients");
    // Local partial sums, in send order.
    fbuf_.resize(send_ids_.size() * dim);
    sum_rows(grads, n, dedup_.inverse().data(), pos_.data(), dim, fbuf_.data());
    wbuf_.resize(send_ids_.size() * wire_row_bytes_);
    wire_encode(fbuf_.data(), fbuf_.size(), wd, wbuf_.data());
  } catch (...) {
    o.capture();
  }
  route_ids(o, "hb_embedding_apply_gradients");
  ++stats_.applies;
  stats_.ids += n;
  stats_.request_bytes += remote_sent() * (8 + wire_row_bytes_);
  stats_.unique_ids += dedup_.unique().size();

  const size_t nrecv = recv_ids_.size();
  wbuf2_.resize(nrecv * wire_row_bytes_);
  exchange_payload(wbuf_.data(), send_counts_, wbuf2_.data(), recv_counts_,
                   wire_row_bytes_);
  fbuf2_.resize(nrecv * dim);
  wire_decode(wbuf2_.data(), nrecv * dim, wd, fbuf2_.data());

  const Optimizer &opt = shard_->optimizer();
  int64_t nu = owner_dedup();
  if (nu < 0) {
    for (size_t j = 0; j < nrecv; ++j)
      opt.step(shard_->get(recv_ids_[j]), fbuf2_.data() + j * dim);
    return;
  }
  // Sum the ranks' partial sums of each id in rank order: received data is
  // packed by source rank and each rank sent an id at most once.
  fbuf_.resize(nu * dim);
  sum_rows(fbuf2_.data(), nrecv, owner_dedup_.inverse().data(), nullptr, dim,
           fbuf_.data());
  const std::vector<int64_t> &u = owner_dedup_.unique();
  for (int64_t k = 0; k < nu; ++k)
    opt.step(shard_->get(u[k]), fbuf_.data() + k * dim);
}

}  // namespace emb
}  // namespace hb
