#include "rendezvous/store.h"

#include <cerrno>
#include <cstdlib>

#include "abi/error.h"
#include "rendezvous/protocol.h"

namespace hb {
namespace rdv {
namespace {

// Long lists in messages are cut after this many names.
constexpr size_t kMaxNamed = 32;

int64_t deadline_of(int64_t now_ms, int64_t timeout_ms) {
  if (timeout_ms < 0) timeout_ms = 0;
  return timeout_ms > INT64_MAX - now_ms ? INT64_MAX : now_ms + timeout_ms;
}

}  // namespace

bool parse_int64(const std::string &s, int64_t *v) {
  if (s.empty() || s[0] == ' ' || s[0] == '\t' || s[0] == '\n') return false;
  errno = 0;
  char *end = nullptr;
  long long x = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end != s.c_str() + s.size()) return false;
  *v = x;
  return true;
}

bool Store::all_present(const std::vector<std::string> &keys) const {
  for (const auto &k : keys)
    if (!kv_.count(k)) return false;
  return true;
}

std::string Store::missing_keys(const std::vector<std::string> &keys) const {
  std::string s;
  size_t n = 0;
  for (const auto &k : keys) {
    if (kv_.count(k)) continue;
    if (n < kMaxNamed) s += (n ? ", '" : "'") + k + "'";
    ++n;
  }
  if (n > kMaxNamed) s += format(" and %zu more", n - kMaxNamed);
  return s;
}

std::string Store::missing_ranks(const Round &round) const {
  std::string s;
  int n = 0;
  for (int r = 0; r < world_size_; ++r) {
    if (round.arrived.count(r) || round.gave_up.count(r)) continue;
    if (static_cast<size_t>(n) < kMaxNamed) s += format(n ? ", %d" : "%d", r);
    ++n;
  }
  if (static_cast<size_t>(n) > kMaxNamed)
    s += format(" and %zu more", static_cast<size_t>(n) - kMaxNamed);
  return s;
}

Frame Store::answer(const Parked &p) const {
  return make_reply(p.id, HB_OK, p.want_value ? kv_.at(p.keys[0]) : "");
}

void Store::set(const std::string &key, std::string value,
                std::vector<Outgoing> *out) {
  kv_[key] = std::move(value);
  for (auto it = parked_.begin(); it != parked_.end();) {
    bool wakes = false;
    for (const auto &k : it->keys) wakes = wakes || k == key;
    if (wakes && all_present(it->keys)) {
      out->push_back({it->conn, answer(*it)});
      it = parked_.erase(it);
    } else {
      ++it;
    }
  }
}

void Store::get(uint64_t conn, uint64_t id, const std::string &key,
                int64_t timeout_ms, int64_t now_ms,
                std::vector<Outgoing> *out) {
  park({conn, id, {key}, true, deadline_of(now_ms, timeout_ms), timeout_ms},
       now_ms, out);
}

int64_t add_to_value(const std::string &key, const std::string *value,
                     int64_t delta) {
  int64_t cur = 0;
  if (value && !parse_int64(*value, &cur))
    fail(HB_ERR_INVALID_ARGUMENT,
         "rendezvous add on key '%s': its value is not an integer",
         key.c_str());
  int64_t sum;
  if (__builtin_add_overflow(cur, delta, &sum))
    fail(HB_ERR_INVALID_ARGUMENT,
         "rendezvous add on key '%s': %lld + %lld overflows int64", key.c_str(),
         static_cast<long long>(cur), static_cast<long long>(delta));
  return sum;
}

void Store::add(uint64_t conn, uint64_t id, const std::string &key,
                int64_t delta, std::vector<Outgoing> *out) {
  auto it = kv_.find(key);
  int64_t sum;
  try {
    sum = add_to_value(key, it == kv_.end() ? nullptr : &it->second, delta);
  } catch (const Error &e) {
    out->push_back({conn, make_reply(id, e.status(), e.what())});
    return;
  }
  out->push_back({conn, make_reply(id, HB_OK, "", sum)});
  set(key, std::to_string(sum), out);
}

void Store::wait(uint64_t conn, uint64_t id, std::vector<std::string> keys,
                 int64_t timeout_ms, int64_t now_ms,
                 std::vector<Outgoing> *out) {
  park({conn, id, std::move(keys), false, deadline_of(now_ms, timeout_ms),
        timeout_ms},
       now_ms, out);
}

void Store::park(Parked p, int64_t now_ms, std::vector<Outgoing> *out) {
  if (all_present(p.keys)) {
    out->push_back({p.conn, answer(p)});
    return;
  }
  parked_.push_back(std::move(p));
  if (parked_.back().deadline <= now_ms) expire(now_ms, out);
}

void Store::barrier(uint64_t conn, uint64_t id, int rank,
                    const std::string &name, int64_t timeout_ms, int64_t now_ms,
                    std::vector<Outgoing> *out) {
  auto found = rounds_.find(name);
  if (found == rounds_.end()) {
    found = rounds_.emplace(name, Round()).first;
    found->second.generation = completed_[name];
  }
  Round &round = found->second;
  if (round.arrived.count(rank)) {
    out->push_back({conn, make_reply(id, HB_ERR_INVALID_ARGUMENT,
                                     format("rank %d is already waiting at "
                                            "barrier '%s' (generation %llu)",
                                            rank, name.c_str(),
                                            static_cast<unsigned long long>(
                                                round.generation)))});
    return;
  }
  round.gave_up.erase(rank);
  round.arrived[rank] = {conn, id, deadline_of(now_ms, timeout_ms), timeout_ms};
  if (static_cast<int>(round.arrived.size()) == world_size_) {
    for (const auto &a : round.arrived)
      out->push_back(
          {a.second.conn, make_reply(a.second.id, HB_OK, "",
                                     static_cast<int64_t>(round.generation))});
    completed_[name] = round.generation + 1;
    rounds_.erase(found);
    return;
  }
  if (round.arrived[rank].deadline <= now_ms) expire(now_ms, out);
}

void Store::expire(int64_t now_ms, std::vector<Outgoing> *out) {
  for (auto it = parked_.begin(); it != parked_.end();) {
    if (it->deadline > now_ms) {
      ++it;
      continue;
    }
    std::string msg =
        it->want_value
            ? format(
                  "rendezvous get timed out after %lld ms: key %s was never "
                  "set",
                  static_cast<long long>(it->timeout_ms),
                  missing_keys(it->keys).c_str())
            : format("rendezvous wait timed out after %lld ms: missing keys %s",
                     static_cast<long long>(it->timeout_ms),
                     missing_keys(it->keys).c_str());
    out->push_back({it->conn, make_reply(it->id, HB_ERR_TIMEOUT, msg)});
    it = parked_.erase(it);
  }
  for (auto rit = rounds_.begin(); rit != rounds_.end();) {
    Round &round = rit->second;
    // Name the missing ranks as they were when the deadline passed, before
    // removing the ranks that time out now.
    std::string missing = missing_ranks(round);
    size_t arrived = round.arrived.size() + round.gave_up.size();
    for (auto ait = round.arrived.begin(); ait != round.arrived.end();) {
      if (ait->second.deadline > now_ms) {
        ++ait;
        continue;
      }
      out->push_back(
          {ait->second.conn,
           make_reply(ait->second.id, HB_ERR_TIMEOUT,
                      format("barrier '%s' (generation %llu) timed out after "
                             "%lld ms: ranks %s did not arrive (%zu of %d "
                             "did)",
                             rit->first.c_str(),
                             static_cast<unsigned long long>(round.generation),
                             static_cast<long long>(ait->second.timeout_ms),
                             missing.c_str(), arrived, world_size_))});
      round.gave_up.insert(ait->first);
      ait = round.arrived.erase(ait);
    }
    if (round.arrived.empty())
      rit = rounds_.erase(rit);
    else
      ++rit;
  }
}

void Store::drop(uint64_t conn) {
  for (auto it = parked_.begin(); it != parked_.end();)
    it = it->conn == conn ? parked_.erase(it) : std::next(it);
  for (auto rit = rounds_.begin(); rit != rounds_.end();) {
    auto &arrived = rit->second.arrived;
    for (auto ait = arrived.begin(); ait != arrived.end();)
      ait = ait->second.conn == conn ? arrived.erase(ait) : std::next(ait);
    rit = arrived.empty() ? rounds_.erase(rit) : std::next(rit);
  }
}

int64_t Store::next_deadline() const {
  int64_t d = INT64_MAX;
  for (const auto &p : parked_) d = p.deadline < d ? p.deadline : d;
  for (const auto &r : rounds_)
    for (const auto &a : r.second.arrived)
      d = a.second.deadline < d ? a.second.deadline : d;
  return d;
}

size_t Store::num_parked() const {
  size_t n = parked_.size();
  for (const auto &r : rounds_) n += r.second.arrived.size();
  return n;
}

}  // namespace rdv
}  // namespace hb
