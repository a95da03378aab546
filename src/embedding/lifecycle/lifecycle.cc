#include "embedding/lifecycle/lifecycle.h"

#include "embedding/init.h"
#include "embedding/shard.h"

namespace hb {
namespace lifecycle {

Lifecycle::Lifecycle(const emb::Spec &spec, int world, RowMeta &meta)
    : p_(spec.life),
      dim_(spec.dim),
      name_hash_(fnv1a64(spec.name.data(), spec.name.size())),
      spec_(spec),
      meta_(meta),
      adm_(spec.life, world) {
  on_load();
}

void Lifecycle::on_load() {
  times_.clear();
  // Steps up to now count as taken now (their times are not kept).
  if (p_.ttl_seconds > 0)
    times_.emplace_back(0, std::chrono::steady_clock::now());
}

void Lifecycle::begin_lookup() {
  if (init_of_.size()) init_of_.reset(init_of_.size());
  init_rows_.clear();
}

const float *Lifecycle::lookup_row(const emb::Shard &s, int64_t id,
                                   float *scratch) {
  if (const float *r = s.find(id)) return r;
  if (adm_.on()) {
    for (int64_t c = 0; c < dim_; ++c) scratch[c] = p_.default_value;
    return scratch;
  }
  emb::init_row(spec_, name_hash_, id, scratch);
  bool inserted;
  init_of_.insert(id, static_cast<uint32_t>(init_rows_.size() / dim_),
                  &inserted);
  if (inserted) init_rows_.insert(init_rows_.end(), scratch, scratch + dim_);
  return scratch;
}

void Lifecycle::apply(emb::Shard &s, Exchange &x, const int64_t *ids, size_t n,
                      const float *g) {
  const uint64_t step = meta_.next_step();
  if (p_.ttl_seconds > 0)
    times_.emplace_back(step, std::chrono::steady_clock::now());
  const emb::Optimizer &opt = s.optimizer();
  fresh_.clear();
  for (size_t k = 0; k < n; ++k) {
    int64_t idx = s.find_index(ids[k]);
    if (idx < 0) {
      fresh_.push_back(k);
      continue;
    }
    opt.step(s.record_at(idx), g + k * dim_);
    meta_.on_update(idx);
  }
  // Count every new id of the step before testing any: the outcome must
  // not depend on the order of the ids.
  if (adm_.on())
    for (size_t k : fresh_) adm_.count(ids[k], step);
  for (size_t k : fresh_) {
    if (!adm_.admitted(ids[k])) {
      ++stats_.dropped;
      continue;
    }
    adm_.forget(ids[k]);
    // Created and initialized (with the row the last lookup computed, if
    // it looked this id up).
    const uint32_t at = init_of_.find(ids[k]);
    const int64_t idx = s.create_with(
        ids[k], at == emb::IdMap::kEmpty ? nullptr : &init_rows_[at * dim_]);
    opt.step(s.record_at(idx), g + k * dim_);
    meta_.on_update(idx);
    ++stats_.admitted;
  }
  if (p_.evicts() && step % static_cast<uint64_t>(p_.evict_interval) == 0)
    boundary(s, x);
}

}  // namespace lifecycle
}  // namespace hb
