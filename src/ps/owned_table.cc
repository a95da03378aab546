#include "ps/owned_table.h"

#include <algorithm>
#include <cstring>

#include "embedding/plan.h"
#include "embedding/wire.h"

namespace hb {
namespace ps {
namespace {

emb::Spec ps_layout(emb::Spec s) {
  s.partition = HB_PARTITION_MOD;  // id mod num_ps
  s.device = -1;
  return s;
}

}  // namespace

OwnedTable::OwnedTable(const emb::Spec &spec, int ps_index, int num_ps,
                       int world, int64_t staleness, bool age)
    : spec_(ps_layout(spec)),
      fingerprint_(emb::spec_fingerprint(spec)),
      ps_index_(ps_index),
      num_ps_(num_ps),
      shard_(new emb::Shard(spec_, ps_index, num_ps)),
      clock_(world, staleness, age),
      pend_ids_(world),
      pend_grads_(world),
      has_pend_(world, 0),
      committed_(world, {-1, -1}),
      position_(world),
      attached_(world, 0) {}

void OwnedTable::check_ids(const std::vector<int64_t> &ids) const {
  for (int64_t id : ids) {
    bool mine = static_cast<int>(static_cast<uint64_t>(id) %
                                 static_cast<uint64_t>(num_ps_)) == ps_index_;
    bool in_range = spec_.dynamic() || (id >= 0 && id < spec_.num_rows);
    if (!mine || !in_range)
      fail(HB_ERR_INVALID_ARGUMENT, "table '%s': id %lld %s (ps task %d of %d)",
           spec_.name.c_str(), static_cast<long long>(id),
           !in_range ? "out of range" : "is not owned here", ps_index_,
           num_ps_);
  }
}

void OwnedTable::set_rows(const std::vector<int64_t> &ids,
                          const std::vector<float> &w) {
  if (w.size() != ids.size() * static_cast<size_t>(spec_.dim))
    fail(HB_ERR_CORRUPT, "table '%s': %zu init values for %zu rows",
         spec_.name.c_str(), w.size(), ids.size());
  check_ids(ids);
  for (size_t i = 0; i < ids.size(); ++i)
    std::memcpy(shard_->get(ids[i]), &w[i * spec_.dim], 4 * spec_.dim);
}

void OwnedTable::attach(int rank) {
  attached_[rank] = 1;
  clock_.attach(rank);
}

void OwnedTable::grow(int world) {
  if (world <= clock_.world()) return;
  clock_.grow(world);
  pend_ids_.resize(world);
  pend_grads_.resize(world);
  has_pend_.resize(world, 0);
  committed_.resize(world, {-1, -1});
  position_.resize(world);
  attached_.resize(world, 0);
}

void OwnedTable::revive(int rank) {
  attached_[rank] = 1;
  clock_.revive(rank);
}

void OwnedTable::left(int rank, Stats &st) {
  clock_.left(rank);
  apply_rounds(st);
}

void OwnedTable::lost(int rank, Stats &st) {
  clock_.lost(rank);
  apply_rounds(st);
}

std::string OwnedTable::pull(const std::vector<int64_t> &ids, Stats &st) {
  check_ids(ids);
  const size_t rb = emb::wire_size(spec_.wire_dtype) * spec_.dim;
  std::string rows(ids.size() * rb, '\0');
  for (size_t j = 0; j < ids.size(); ++j)
    emb::wire_encode(shard_->get(ids[j]), spec_.dim, spec_.wire_dtype,
                     &rows[j * rb]);
  ++st.pulls;
  st.rows_pulled += static_cast<int64_t>(ids.size());
  return rows;
}

void OwnedTable::step_rows(const int64_t *ids, size_t n, const float *g) {
  const emb::Optimizer &opt = shard_->optimizer();
  for (size_t j = 0; j < n; ++j)
    opt.step(shard_->get(ids[j]), g + j * spec_.dim);
}

bool OwnedTable::split_replay(const SplitTag &t) const {
  if (!t.valid()) return false;
  const int64_t applied = split_applied(t.epoch, t.split);
  if (t.end <= applied) return true;
  if (t.begin < applied)
    fail(HB_ERR_INVALID_ARGUMENT,
         "table '%s': a push of samples [%lld, %lld) of split %lld (epoch "
         "%lld) straddles what ps task %d applied of it, up to %lld (resume a "
         "split with a first batch that ends at the lease's replay_end)",
         spec_.name.c_str(), static_cast<long long>(t.begin),
         static_cast<long long>(t.end), static_cast<long long>(t.split),
         static_cast<long long>(t.epoch), ps_index_,
         static_cast<long long>(applied));
  return false;
}

void OwnedTable::push(int rank, std::pair<int64_t, int64_t> step,
                      std::vector<int64_t> ids, std::vector<float> grads,
                      const std::string &pos, Stats &st, int64_t pulled,
                      const SplitTag &tag) {
  const bool rounds = clock_.bound() == 0;
  if (rounds && has_pend_[rank])
    fail(HB_ERR_INTERNAL, "table '%s': rank %d pushed twice in round %lld",
         spec_.name.c_str(), rank, static_cast<long long>(round_));
  if (clock_.by_age()) {
    // max_staleness: the oldest push; bound_violations: pushes past k
    // (applied scaled, as documented).
    const int64_t age = pulled < 0 || pulled > version_ ? 0 : version_ - pulled;
    st.max_staleness = std::max(st.max_staleness, age);
    if (age > clock_.bound()) {
      ++st.bound_violations;
      const float scale = 1.0f / static_cast<float>(1 + age);
      for (float &g : grads) g *= scale;
    }
  } else {
    const int64_t lead = clock_.lead(rank);
    st.max_staleness = std::max(st.max_staleness, lead);
    if (lead > clock_.bound()) ++st.bound_violations;
  }
  committed_[rank] = step;
  position_[rank] = pos;
  if (tag.valid()) split_done_[{tag.epoch, tag.split}] = tag.end;
  ++st.pushes;
  st.rows_pushed += static_cast<int64_t>(ids.size());
  if (rounds) {
    has_pend_[rank] = 1;
    pend_ids_[rank] = std::move(ids);
    pend_grads_[rank] = std::move(grads);
    clock_.tick(rank);
    apply_rounds(st);
  } else {
    step_rows(ids.data(), ids.size(), grads.data());
    if (!ids.empty()) ++version_;  // an empty push changes no row
    clock_.tick(rank);
  }
}

void OwnedTable::apply_rounds(Stats &st) {
  if (clock_.bound() != 0) return;
  for (;;) {
    const int64_t slowest = clock_.slowest();
    const bool any =
        std::find(has_pend_.begin(), has_pend_.end(), 1) != has_pend_.end();
    const bool idle = slowest == StalenessClock::kNone;
    if (!(idle ? any : slowest > round_)) return;
    // The round's partial sums in rank order, summed per id (the first
    // copied, the later ones added: the collective owner's order).
    const int64_t dim = spec_.dim;
    ids_.clear();
    grads_.clear();
    for (size_t r = 0; r < has_pend_.size(); ++r) {
      if (!has_pend_[r]) continue;
      ids_.insert(ids_.end(), pend_ids_[r].begin(), pend_ids_[r].end());
      grads_.insert(grads_.end(), pend_grads_[r].begin(), pend_grads_[r].end());
      has_pend_[r] = 0;
      pend_ids_[r].clear();
      pend_grads_[r].clear();
    }
    dedup_.run(ids_.data(), ids_.size());
    const std::vector<int64_t> &u = dedup_.unique();
    sum_.resize(u.size() * dim);
    emb::sum_rows(grads_.data(), ids_.size(), dedup_.inverse().data(), nullptr,
                  dim, sum_.data());
    step_rows(u.data(), u.size(), sum_.data());
    ++round_;
    ++version_;
    ++st.rounds;
    if (idle) return;
  }
}

emb::ShardFile OwnedTable::save(const std::string &dir, uint64_t nonce) {
  emb::make_dirs("ps save of '" + spec_.name + "'", dir);
  const emb::Shard &s = *shard_;
  return emb::write_shard_file(
      spec_, s.record_words(), s.rows(),
      [&](const emb::RecordVisitor &f) { s.for_each(f); },
      /*life_state=*/nullptr, dir, nonce, ps_index_, num_ps_);
}

emb::ShardFile OwnedTable::save_positions(const std::string &dir,
                                          uint64_t nonce) {
  Committed c;
  c.step = committed_;
  c.position = position_;
  return write_positions(dir, nonce, spec_.name, ps_index_, num_ps_, c);
}

void OwnedTable::stage(const std::string &dir, uint64_t nonce, int old_num_ps) {
  staged_committed_.reset();
  staged_ = emb::read_checkpoint(spec_, shard_->record_words(), dir.c_str(),
                                 ps_index_, num_ps_, nullptr);
  if (old_num_ps > 0)
    staged_committed_.reset(new Committed(
        read_positions(dir, nonce, spec_.name, ps_index_, num_ps_, old_num_ps,
                       static_cast<int>(committed_.size()))));
}

void OwnedTable::commit_staged(bool commit) {
  if (!commit) return staged_.reset(), staged_committed_.reset();
  if (!staged_)
    fail(HB_ERR_INVALID_ARGUMENT, "table '%s': nothing staged to load",
         spec_.name.c_str());
  shard_ = std::move(staged_);
  // The batches applied since are gone with the rows: none may be dropped
  // as a replay now (the queue, restored with them, resumes its splits at
  // the checkpoint's offsets).
  split_done_.clear();
  if (!staged_committed_) return;
  committed_ = std::move(staged_committed_->step);
  position_ = std::move(staged_committed_->position);
  staged_committed_.reset();
  std::fill(has_pend_.begin(), has_pend_.end(), 0);
  for (auto &v : pend_ids_) v.clear();
  for (auto &v : pend_grads_) v.clear();
}

void OwnedTable::dump(std::vector<int64_t> *ids, std::string *rows) const {
  const int64_t dim = spec_.dim;
  shard_->for_each([&](int64_t id, const float *rec) {
    ids->push_back(id);
    rows->append(reinterpret_cast<const char *>(rec), 4 * dim);
  });
}

}  // namespace ps
}  // namespace hb
