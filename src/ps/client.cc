#include "ps/client.h"

#include <algorithm>
#include <chrono>

#include "common/clock.h"
#include "context/context.h"
#include "ps/ps_table.h"

namespace hb {
namespace ps {

Client::Client(hb_context &ctx) : rank_(ctx.cluster.rank) {
  const Options &o = ctx.options;
  const std::vector<std::string> &hosts = ctx.cluster.ps_hosts;
  for (size_t i = 0; i < hosts.size(); ++i) {
    ConnConfig cc;
    split_host_port(hosts[i], "ps_hosts entry", &cc.host, &cc.port);
    cc.ps_index = static_cast<int>(i);
    cc.rank = ctx.cluster.rank;
    cc.world = ctx.cluster.world_size;
    cc.connect_timeout_ms = o.get_int("connect_timeout_ms");
    cc.peer_timeout_ms = o.get_int("peer_timeout_ms");
    cc.timeout_ms = o.get_int("timeout_ms");
    cc.max_frame_bytes = static_cast<size_t>(o.get_int("max_frame_bytes"));
    conns_.emplace_back(new Conn(cc, &health_));
  }
  timeout_ms_ = o.get_int("timeout_ms");
  heartbeat_ = std::thread(&Client::heartbeats, this,
                           o.get_int("heartbeat_interval_ms"));
}

Client::~Client() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
  for (auto &c : conns_) c->bye();
}

void Client::heartbeats(int64_t interval_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(interval_ms));
    if (stop_) break;
    lock.unlock();
    for (auto &c : conns_) c->ping();
    lock.lock();
  }
}

void Client::add_table(PsTable *t) {
  std::lock_guard<std::mutex> lock(mu_);
  tables_.push_back(t);
}

void Client::remove_table(PsTable *t) {
  std::lock_guard<std::mutex> lock(mu_);
  tables_.erase(std::remove(tables_.begin(), tables_.end(), t), tables_.end());
}

std::string Client::committed(int64_t *step) {
  int64_t best = -1;
  std::string pos;
  for (int i = 0; i < num_ps(); ++i) {
    Frame r = conn(i).call(request(kPosition), "position");
    if (r.ints.size() != 3 * r.strs.size())
      fail(HB_ERR_CORRUPT, "ps position: %zu fields for %zu tables",
           r.ints.size(), r.strs.size());
    for (size_t k = 0; k < r.strs.size(); ++k) {
      int64_t s = r.ints[3 * k + 1];
      if (best < 0 || s < best) {
        best = s;
        pos = r.strs[k];
      }
    }
  }
  if (best < 0) best = 0, pos.clear();  // nothing pushed yet
  *step = best;
  step_ = best;
  position_ = pos;
  std::lock_guard<std::mutex> lock(mu_);
  for (PsTable *t : tables_) t->rewind();
  return pos;
}

void Client::resync() {
  std::vector<Frame> replies;
  for (int i = 0; i < num_ps(); ++i) {
    replies.push_back(conn(i).call(request(kPosition), "position"));
    if (replies.back().ints.size() % 3)
      fail(HB_ERR_CORRUPT, "ps position: %zu fields",
           replies.back().ints.size());
  }
  std::lock_guard<std::mutex> lock(mu_);
  int64_t newest = 0;
  for (PsTable *t : tables_) {
    std::pair<int64_t, int64_t> last{-1, -1};
    for (int i = 0; i < num_ps(); ++i) {
      const std::vector<int64_t> &v = replies[i].ints;
      for (size_t k = 0; k + 2 < v.size(); k += 3)
        if (v[k] == t->remote_id(i))
          last = std::max(last, std::make_pair(v[k + 1], v[k + 2]));
    }
    t->resume_after(last);
    newest = std::max(newest, last.first);
  }
  step_ = newest;
}

Stats Client::stats() {
  Stats sum;
  for (int i = 0; i < num_ps(); ++i) {
    Frame r = conn(i).call(request(kStats), "stats");
    if (r.ints.size() < Stats::kFields)
      fail(HB_ERR_CORRUPT, "ps stats: %zu fields", r.ints.size());
    const int64_t *v = r.ints.data();
    sum.pulls += v[0], sum.pushes += v[1], sum.rows_pulled += v[2];
    sum.rows_pushed += v[3], sum.rounds += v[4];
    sum.max_staleness = std::max(sum.max_staleness, v[5]);
    sum.bound_violations += v[6], sum.duplicate_pushes += v[7];
    sum.workers_lost += v[8], sum.workers_rejoined += v[9];
    sum.busy_us += v[10];
    // Ranks gone from every ps task.
    sum.workers_left = i == 0 ? v[11] : std::min(sum.workers_left, v[11]);
    sum.cpu_us += v[12];
    sum.workers_gone = i == 0 ? v[13] : std::min(sum.workers_gone, v[13]);
  }
  return sum;
}

SplitLease Client::split_next(bool wait) {
  split_tag_.clear();
  SplitLease l;
  for (Deadline d(timeout_ms_);;) {
    Frame r = conn(0).call(request(kSplitNext), "next split");
    l.split = r.ints.at(0), l.epoch = r.ints.at(1), l.begin = r.ints.at(2);
    l.end = r.ints.at(3), l.from = r.ints.at(4);
    if (l.split != SplitLease::kWait) break;
    // Meanwhile this worker pushes nothing: it must not hold the holder
    // back (the staleness bound), so every ps task counts it out until its
    // next pull or push.
    if (!idle_)
      for (int i = 0; i < num_ps(); ++i) conn(i).call(request(kIdle), "idle");
    idle_ = true;
    if (!wait) return l;
    // Another worker holds the last splits: wait for it to finish them, or
    // to be given up (then one of them comes back here).
    if (d.expired())
      fail(HB_ERR_TIMEOUT,
           "next split: waited timeout_ms=%lld for the splits other workers "
           "hold",
           static_cast<long long>(timeout_ms_));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  idle_ = false;  // its next pull or push revives it on every ps task
  l.replay_end = l.from;
  if (l.split < 0 || l.from >= l.end) return l;
  // How far each table on each ps task applied it: the queue's offset
  // lags the pushes when its last holder was lost before it committed.
  for (int i = 0; i < num_ps(); ++i) {
    Frame r = conn(i).call(request(kSplitApplied, {l.epoch, l.split}),
                           "split applied");
    for (int64_t e : r.ints) l.replay_end = std::max(l.replay_end, e);
  }
  l.replay_end = std::min(l.replay_end, l.end);
  return l;
}

bool Client::split_save(const std::string &dir, uint64_t nonce, uint64_t *bytes,
                        uint64_t *checksum) {
  Frame r = conn(0).call(
      request(kSplitSave, {static_cast<int64_t>(nonce)}, {dir}), "split save");
  if (r.ints.size() < 2) return false;
  *bytes = static_cast<uint64_t>(r.ints[0]);
  *checksum = static_cast<uint64_t>(r.ints[1]);
  return true;
}

void Client::split_load(const std::string &dir, uint64_t nonce) {
  split_tag_.clear();
  conn(0).call(request(kSplitLoad, {static_cast<int64_t>(nonce)}, {dir}),
               "split load");
}

void Client::split_batch(const SplitLease &l, int64_t begin, int64_t end) {
  const int64_t t[4] = {l.epoch, l.split, begin, end};
  split_tag_ = pack(t, 4);
}

void Client::split_commit(int64_t split, int64_t offset, bool done) {
  conn(0).call(request(kSplitCommit, {split, offset, done ? 1 : 0}),
               "split commit");
}

void Client::split_flush() {
  if (!pending_) return;
  pending_ = false;
  const bool done = held_offset_ >= held_.end;
  split_commit(held_.split, held_offset_, done);
  if (done) held_.split = -1;
}

SplitLease Client::split_take(bool wait) {
  split_flush();
  if (!resumed_) {  // a restarted worker: where its pushes were applied
    int64_t step = 0;
    decode_split_position(committed(&step), &resume_);
    resumed_ = true;
  }
  for (;;) {
    SplitLease l = split_next(wait);
    if (l.split == SplitLease::kWait) {  // nothing now: ask again later
      held_.split = -1;
      return l;
    }
    if (l.split >= 0 && l.split == resume_.split && l.epoch == resume_.epoch) {
      // The queue hears of an offset one step after the pushes carried it.
      l.from = std::max(l.from, std::min(resume_.offset, l.end));
      resume_ = SplitPosition();
    }
    held_ = l;
    held_offset_ = l.from;
    // Killed after the split's last pushes, before the queue heard: done.
    if (l.split >= 0 && l.from >= l.end) {
      split_commit(l.split, l.end, true);
      continue;
    }
    return l;
  }
}

void Client::split_step(int64_t split, int64_t offset) {
  if (held_.split < 0 || split != held_.split)
    fail(HB_ERR_INVALID_ARGUMENT,
         "hb_ps_split_commit: split %lld is not this worker's (it holds %lld)",
         static_cast<long long>(split), static_cast<long long>(held_.split));
  if (offset < held_offset_ || offset > held_.end)
    fail(HB_ERR_INVALID_ARGUMENT,
         "hb_ps_split_commit: offset %lld of split %lld is outside [%lld, "
         "%lld] (the last offset committed, the split's end)",
         static_cast<long long>(offset), static_cast<long long>(split),
         static_cast<long long>(held_offset_),
         static_cast<long long>(held_.end));
  if (held_offset_ < held_.replay_end && offset != held_.replay_end)
    fail(HB_ERR_INVALID_ARGUMENT,
         "hb_ps_split_commit: the first batch of split %lld must end at its "
         "replay_end %lld (a lost holder's last batch, applied by some ps "
         "tables only), not at %lld",
         static_cast<long long>(split),
         static_cast<long long>(held_.replay_end),
         static_cast<long long>(offset));
  split_flush();  // the last step's pushes were all answered
  // The pushes that follow carry samples [held_offset_, offset): a table
  // that applied them already (whoever pushed) drops them.
  split_batch(held_, held_offset_, offset);
  held_offset_ = offset;
  pending_ = true;
  SplitPosition p;
  p.split = split, p.epoch = held_.epoch, p.offset = offset;
  set_position(encode_split_position(p));
}

std::shared_ptr<Client> client_of(hb_context &ctx, const char *what) {
  if (ctx.cluster.ps_hosts.empty())
    fail(HB_ERR_INVALID_ARGUMENT,
         "%s: this job has no ps tasks (TF_CONFIG \"ps\", hbrun --ps or "
         "HB_PS_HOSTS)",
         what);
  if (!ctx.cluster.in_world)
    fail(HB_ERR_INVALID_ARGUMENT,
         "%s: this is a ps task (it serves with hb_context_serve)", what);
  std::lock_guard<std::mutex> lock(ctx.ps_mu);
  if (!ctx.ps) ctx.ps = std::make_shared<Client>(ctx);
  return ctx.ps;
}

}  // namespace ps
}  // namespace hb
