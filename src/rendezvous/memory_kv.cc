#include "rendezvous/memory_kv.h"

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>

#include "abi/error.h"
#include "common/clock.h"
#include "common/health.h"
#include "rendezvous/store.h"

namespace hb {
namespace rdv {

struct MemoryKV::State {
  std::mutex mu;
  std::condition_variable cv;
  bool failed = false;
  std::map<std::string, std::string> kv;

  // Waits until every key exists; throws HB_ERR_TIMEOUT naming the missing
  // ones, or the Health's error.
  void wait(std::unique_lock<std::mutex> &lock, Health *health,
            const std::vector<std::string> &keys, int64_t timeout_ms,
            const char *what) {
    auto missing = [&] {
      std::string s;
      for (const auto &k : keys)
        if (!kv.count(k)) s += (s.empty() ? "'" : ", '") + k + "'";
      return s;
    };
    auto end = Clock::now() +
               std::chrono::milliseconds(timeout_ms > 0 ? timeout_ms : 0);
    cv.wait_until(lock, end, [&] { return failed || missing().empty(); });
    if (failed) {
      lock.unlock();
      health->check();
    }
    std::string m = missing();
    if (!m.empty())
      fail(HB_ERR_TIMEOUT,
           "rendezvous %s timed out after %lld ms: missing keys %s", what,
           static_cast<long long>(timeout_ms), m.c_str());
  }
};

MemoryKV::MemoryKV(Health *health)
    : health_(health), st_(std::make_shared<State>()) {
  if (!health_) return;
  auto st = st_;
  sub_id_ = health_->subscribe([st](hb_status, const std::string &) {
    {
      std::lock_guard<std::mutex> lock(st->mu);
      st->failed = true;
    }
    st->cv.notify_all();
  });
}

MemoryKV::~MemoryKV() {
  if (health_) health_->unsubscribe(sub_id_);
}

void MemoryKV::set(const std::string &key, const std::string &value) {
  if (health_) health_->check();
  {
    std::lock_guard<std::mutex> lock(st_->mu);
    st_->kv[key] = value;
  }
  st_->cv.notify_all();
}

std::string MemoryKV::get(const std::string &key, int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(st_->mu);
  st_->wait(lock, health_, {key}, timeout_ms, "get");
  return st_->kv[key];
}

int64_t MemoryKV::add(const std::string &key, int64_t delta) {
  if (health_) health_->check();
  int64_t sum;
  {
    std::lock_guard<std::mutex> lock(st_->mu);
    auto it = st_->kv.find(key);
    sum = add_to_value(key, it == st_->kv.end() ? nullptr : &it->second, delta);
    st_->kv[key] = std::to_string(sum);
  }
  st_->cv.notify_all();
  return sum;
}

void MemoryKV::wait(const std::vector<std::string> &keys, int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(st_->mu);
  st_->wait(lock, health_, keys, timeout_ms, "wait");
}

}  // namespace rdv
}  // namespace hb
