#include "rendezvous/memory_kv.h"

#include <chrono>

#include "abi/error.h"
#include "common/clock.h"
#include "context/health.h"
#include "rendezvous/store.h"

namespace hb {
namespace rdv {

MemoryKV::MemoryKV(Health *health) : health_(health) {
  if (health_)
    sub_id_ = health_->subscribe([this](hb_status, const std::string &) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        failed_ = true;
      }
      cv_.notify_all();
    });
}

MemoryKV::~MemoryKV() {
  if (health_) health_->unsubscribe(sub_id_);
}

void MemoryKV::set(const std::string &key, const std::string &value) {
  if (health_) health_->check();
  {
    std::lock_guard<std::mutex> lock(mu_);
    kv_[key] = value;
  }
  cv_.notify_all();
}

std::string MemoryKV::get(const std::string &key, int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  wait_locked(lock, {key}, timeout_ms, "get");
  return kv_[key];
}

int64_t MemoryKV::add(const std::string &key, int64_t delta) {
  if (health_) health_->check();
  int64_t sum;
  {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t cur = 0;
    auto it = kv_.find(key);
    if (it != kv_.end() && !parse_int64(it->second, &cur))
      fail(HB_ERR_INVALID_ARGUMENT,
           "rendezvous add on key '%s': its value is not an integer",
           key.c_str());
    if (__builtin_add_overflow(cur, delta, &sum))
      fail(HB_ERR_INVALID_ARGUMENT,
           "rendezvous add on key '%s': %lld + %lld overflows int64",
           key.c_str(), static_cast<long long>(cur),
           static_cast<long long>(delta));
    kv_[key] = std::to_string(sum);
  }
  cv_.notify_all();
  return sum;
}

void MemoryKV::wait(const std::vector<std::string> &keys, int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  wait_locked(lock, keys, timeout_ms, "wait");
}

void MemoryKV::wait_locked(std::unique_lock<std::mutex> &lock,
                           const std::vector<std::string> &keys,
                           int64_t timeout_ms, const char *what) {
  auto missing = [&] {
    std::string s;
    for (const auto &k : keys)
      if (!kv_.count(k)) s += (s.empty() ? "'" : ", '") + k + "'";
    return s;
  };
  auto end =
      Clock::now() + std::chrono::milliseconds(timeout_ms > 0 ? timeout_ms : 0);
  cv_.wait_until(lock, end, [&] { return failed_ || missing().empty(); });
  if (failed_) {
    lock.unlock();
    health_->check();
  }
  std::string m = missing();
  if (!m.empty())
    fail(HB_ERR_TIMEOUT,
         "rendezvous %s timed out after %lld ms: missing keys %s", what,
         static_cast<long long>(timeout_ms), m.c_str());
}

}  // namespace rdv
}  // namespace hb
