// The boundary of a table's lifecycle: every evict_interval update steps,
// on every rank at the same step, after that step's updates.
//   1. age and norm (local): rows not updated for ttl_steps steps, or whose
//      last update is older than ttl_seconds (the step cutoff comes from
//      rank 0's clock, so all ranks cut at the same step), or whose
//      weights' L2 norm (summed in double) is below min_l2_norm; exact
//      counters not seen for ttl_steps steps are dropped too;
//   2. capacity (collective): while the table holds more than max_rows
//      rows (summed over ranks), the rows of lowest (score, id) go: an
//      exact global selection (select.h) of the excess.
// Evicted rows free their record slots (the shard's free list) and their
// index entries; the ids go to the write log and the callback.
#include <algorithm>
#include <chrono>

#include "common/agreement.h"
#include "embedding/lifecycle/lifecycle.h"
#include "embedding/lifecycle/select.h"
#include "embedding/shard.h"

namespace hb {
namespace lifecycle {

namespace {

// Ids as unsigned keys in signed order.
inline uint64_t id_key(int64_t id) {
  return static_cast<uint64_t>(id) ^ (uint64_t{1} << 63);
}

}  // namespace

uint64_t Lifecycle::time_cutoff(Exchange &x) {
  // Steps whose time is older than ttl_seconds leave the window; the rows
  // last updated before the oldest step still in it are evicted.
  const auto now = std::chrono::steady_clock::now();
  const auto ttl = std::chrono::duration<double>(p_.ttl_seconds);
  while (!times_.empty() && now - times_.front().second >= ttl)
    times_.pop_front();
  uint64_t mine = times_.empty() ? meta_.step() + 1 : times_.front().first;
  const int world = x.world();
  std::vector<int64_t> send(world, static_cast<int64_t>(mine)), recv(world);
  x.alltoall(send.data(), recv.data(), 1);
  return static_cast<uint64_t>(recv[0]);  // rank 0's decision
}

void Lifecycle::boundary(emb::Shard &s, Exchange &x) {
  const auto t0 = std::chrono::steady_clock::now();
  ++stats_.boundaries;
  const uint64_t step = meta_.step();
  const uint64_t ttl = static_cast<uint64_t>(p_.ttl_steps);
  const uint64_t cutoff = p_.ttl_seconds > 0 ? time_cutoff(x) : 0;
  const double l2sq = p_.min_l2_norm * p_.min_l2_norm;
  std::vector<int64_t> victims;
  if (ttl > 0 || cutoff > 0 || l2sq > 0) {
    s.for_each_indexed([&](int64_t idx, int64_t id, const float *r) {
      const uint64_t last = meta_.last_step(idx);
      if ((ttl > 0 && step - last >= ttl) || last < cutoff) {
        victims.push_back(id);
        ++stats_.evicted_ttl;
        return;
      }
      if (l2sq > 0) {
        double q = 0;
        for (int64_t c = 0; c < dim_; ++c) q += double(r[c]) * double(r[c]);
        if (q < l2sq) {
          victims.push_back(id);
          ++stats_.evicted_l2;
        }
      }
    });
    for (int64_t id : victims) s.erase(id);
  }
  adm_.expire(step);
  if (p_.max_rows > 0) {
    const int64_t total = global_sum(x, s.rows());
    ++stats_.selection_rounds;
    if (total > p_.max_rows) evict_capacity(s, x, total - p_.max_rows, victims);
  }
  std::sort(victims.begin(), victims.end());
  for (int64_t id : victims) meta_.on_evict(id);
  if (p_.on_evict && !victims.empty())
    p_.on_evict(victims.data(), victims.size(), p_.user_data);
  stats_.boundary_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
}

void Lifecycle::evict_capacity(emb::Shard &s, Exchange &x, int64_t excess,
                               std::vector<int64_t> &victims) {
  const bool lfu = p_.score == Score::kLfu;
  auto score = [&](int64_t idx) -> uint64_t {
    return lfu ? meta_.updates(idx) : meta_.last_step(idx);
  };
  std::vector<uint64_t> vals;
  vals.reserve(static_cast<size_t>(s.rows()));
  s.for_each_indexed(
      [&](int64_t idx, int64_t, const float *) { vals.push_back(score(idx)); });
  Selected a = select_kth(x, vals, excess);
  stats_.selection_rounds += a.rounds;
  // Ties at the threshold score: the smaller ids go first.
  uint64_t id_cut = UINT64_MAX;
  if (!a.all) {
    vals.clear();
    s.for_each_indexed([&](int64_t idx, int64_t id, const float *) {
      if (score(idx) == a.value) vals.push_back(id_key(id));
    });
    Selected b = select_kth(x, vals, excess - a.below);
    stats_.selection_rounds += b.rounds;
    id_cut = b.value;
  }
  const size_t before = victims.size();
  s.for_each_indexed([&](int64_t idx, int64_t id, const float *) {
    const uint64_t sc = score(idx);
    if (sc < a.value || (sc == a.value && id_key(id) <= id_cut))
      victims.push_back(id);
  });
  for (size_t i = before; i < victims.size(); ++i) s.erase(victims[i]);
  stats_.evicted_capacity += victims.size() - before;
}

}  // namespace lifecycle
}  // namespace hb
