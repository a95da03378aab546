#include "embedding/plan.h"

#include <cstring>

#include "abi/error.h"
#include "embedding/dim_dispatch.h"

namespace hb {
namespace emb {

StepPlan::StepPlan(const Spec &spec, int rank, int world)
    : spec_(spec), part_(spec, world), rank_(rank), world_(world) {}

void StepPlan::check_args(const int64_t *ids, size_t n, const void *data,
                          const char *what) {
  bad_id_.reset();
  send_counts_.assign(world_, 0);
  send_ids_.clear();
  if (world_ > 1) pos_.clear();  // world 1: the identity prefix stays
  HB_CHECK_ARG(n == 0 || (ids && data),
               "%s('%s'): ids or %s is NULL with n = %zu", what,
               spec_.name.c_str(),
               std::strcmp(what, "hb_embedding_lookup") ? "grads" : "out", n);
  HB_CHECK_ARG(n < IdMap::kEmpty, "%s('%s'): n = %zu too large", what,
               spec_.name.c_str(), n);
}

void StepPlan::reject_id(int64_t id, const char *what) {
  bad_id_ = id;
  fail(HB_ERR_INVALID_ARGUMENT, "%s('%s'): id %lld outside [0, %lld)", what,
       spec_.name.c_str(), (long long)id, (long long)spec_.num_rows);
}

void StepPlan::set_send_counts(const int64_t *counts) {
  send_counts_.assign(counts, counts + world_);
}

template <class Owner>
void StepPlan::sort_by_owner(Owner owner) {
  // Counting sort by owner, stable: each peer gets its ids in
  // first-occurrence order.
  const std::vector<int64_t> &u = dedup_.unique();
  int64_t *counts = send_counts_.data();
  for (int64_t id : u) ++counts[owner(id)];
  next_.assign(world_, 0);
  for (int p = 1; p < world_; ++p) next_[p] = next_[p - 1] + counts[p - 1];
  int64_t *next = next_.data();
  uint32_t *pos = pos_.data();
  int64_t *send = send_ids_.data();
  for (size_t i = 0; i < u.size(); ++i) {
    const int64_t at = next[owner(u[i])]++;
    pos[i] = static_cast<uint32_t>(at);
    send[at] = u[i];
  }
}

void StepPlan::prepare(const int64_t *ids, size_t n, const void *data,
                       const char *what) {
  check_args(ids, n, data, what);
  // A static table's ids index [0, num_rows): checked by the dedup when it
  // can index by id, else below.
  const bool checked = dedup_.run(ids, n, spec_.dynamic() ? 0 : spec_.num_rows);
  const std::vector<int64_t> &u = dedup_.unique();
  if (!spec_.dynamic() && !checked) {
    for (int64_t id : u)
      if (id < 0 || id >= spec_.num_rows) reject_id(id, what);
  }
  if (world_ == 1) {
    // Send order = first-occurrence order: pos() only grows its identity
    // prefix, send_ids() is unique() (plan.h).
    for (size_t i = pos_.size(); i < u.size(); ++i)
      pos_.push_back(static_cast<uint32_t>(i));
    send_counts_[0] = static_cast<int64_t>(u.size());
    return;
  }
  pos_.resize(u.size());
  send_ids_.resize(u.size());
  // The partition's kind chosen once per call, not per id (owner() tests
  // it on every call: most of this sort's instructions).
  if (part_.kind == HB_PARTITION_DIV) {
    const int64_t block = part_.block;
    sort_by_owner([block](int64_t id) { return id / block; });
  } else if (part_.shift >= 0) {
    const uint64_t mask = static_cast<uint64_t>(world_) - 1;
    sort_by_owner(
        [mask](int64_t id) { return static_cast<uint64_t>(id) & mask; });
  } else {
    const uint64_t w = static_cast<uint64_t>(world_);
    sort_by_owner([w](int64_t id) { return static_cast<uint64_t>(id) % w; });
  }
}

void StepPlan::agree_counts(Exchange &x, Outcome &o, const char *what) {
  if (bad_id_) {
    o.has_detail = true;
    o.detail = *bad_id_;
  }
  std::string w = std::string(what) + "('" + spec_.name + "')";
  recv_counts_ = agree(x, o, send_counts_, w.c_str(), "id");
}

int64_t StepPlan::recv_total() const {
  int64_t total = 0;
  for (int64_t c : recv_counts_) total += c;
  return total;
}

uint64_t StepPlan::remote_sent() const {
  uint64_t n = 0;
  for (int p = 0; p < world_; ++p)
    if (p != rank_) n += static_cast<uint64_t>(send_counts_[p]);
  return n;
}

int StepPlan::sources() const {
  int sources = 0;
  for (int64_t c : recv_counts_) sources += c > 0;
  return sources;
}

int64_t StepPlan::owner_dedup(const int64_t *recv_ids, size_t nrecv) {
  owner_indexed_ = false;
  if (sources() <= 1) return -1;
  // The senders checked a static table's ids against [0, num_rows) in
  // prepare(), so the owner may index by id as the local dedup does: the
  // same first-occurrence order, without the hash probes (this dedup is
  // work that only a world > 1 does; docs/performance.md, "What 2 ranks
  // spend that 1 rank does not").
  // Each sender deduplicated its ids, so every source's block is free of
  // repeats: the first block is stored without a probe, the last only
  // looked up. Counts that do not cover nrecv (never from a collection)
  // take the plain dedup.
  if (recv_total() == static_cast<int64_t>(nrecv))
    owner_indexed_ = owner_dedup_.run_unique_blocks(
        recv_ids, recv_counts_.data(), recv_counts_.size(), owner_bound());
  else
    owner_indexed_ = owner_dedup_.run(recv_ids, nrecv, owner_bound());
  return static_cast<int64_t>(owner_dedup_.unique().size());
}

int64_t StepPlan::owner_dedup(const int64_t *const *blocks) {
  owner_indexed_ = false;
  if (sources() <= 1) return -1;
  owner_indexed_ = owner_dedup_.run_unique_blocks(
      blocks, recv_counts_.data(), recv_counts_.size(), owner_bound());
  return static_cast<int64_t>(owner_dedup_.unique().size());
}

void sum_rows(const float *src, size_t n, const uint32_t *inv,
              const uint32_t *map, int64_t dim, float *dst, size_t lead) {
  // The width a constant for the common dims: a run-time memcpy was a libc
  // call per unique id (an owner's 4-byte wide-table rows included), most
  // of the extra memmove that 2 ranks spend over 1.
  if (map) lead = 0;  // the leading rows are not in place then
  if (lead) std::memcpy(dst, src, lead * dim * 4);
  with_dim(dim, [&](auto kdim) {
    constexpr int kDim = decltype(kdim)::value;
    const int64_t w = kDim ? kDim : dim;
    uint32_t next_new = static_cast<uint32_t>(lead);
    for (size_t i = lead; i < n; ++i) {
      const uint32_t u = inv[i];
      float *d = dst + (map ? map[u] : u) * w;
      const float *g = src + i * w;
      if constexpr (kDim > 0) {
        // Copy or add without a branch (the owner's later sources hold
        // new and repeated ids in the data's order): a new id's row adds
        // to -0.0f, the copy's bits (dim_dispatch.h, select_row).
        const uint32_t first = u == next_new;
        next_new += first;
        const float *base = select_row(d, first);
        float r[kDim];  // base may be d: through a copy
        for (int c = 0; c < kDim; ++c) r[c] = base[c];
        for (int c = 0; c < kDim; ++c) r[c] += g[c];
        for (int c = 0; c < kDim; ++c) d[c] = r[c];
        continue;
      }
      if (u == next_new) {
        std::memcpy(d, g, w * 4);
        ++next_new;
      } else {
        for (int64_t c = 0; c < w; ++c) d[c] += g[c];
      }
    }
  });
}

void group_by_slot(const uint32_t *inv, size_t n, const uint32_t *map,
                   size_t nslots, std::vector<int64_t> *order,
                   std::vector<int64_t> *seg) {
  seg->assign(nslots + 1, 0);
  for (size_t i = 0; i < n; ++i) ++(*seg)[(map ? map[inv[i]] : inv[i]) + 1];
  for (size_t s = 0; s < nslots; ++s) (*seg)[s + 1] += (*seg)[s];
  std::vector<int64_t> next(seg->begin(), seg->end() - 1);
  order->resize(n);
  for (size_t i = 0; i < n; ++i)
    (*order)[next[map ? map[inv[i]] : inv[i]]++] = static_cast<int64_t>(i);
}

}  // namespace emb
}  // namespace hb
