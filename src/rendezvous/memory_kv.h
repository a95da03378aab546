// An in-process KV for threaded tests of modules that bootstrap through the
// store (several "ranks" as threads sharing one MemoryKV). Same semantics
// as the rendezvous server: blocking get/wait with timeouts naming the
// missing keys, atomic add on decimal values.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>

#include "rendezvous/kv.h"

namespace hb {
class Health;
namespace rdv {

class MemoryKV : public KV {
 public:
  // With a Health, its failure wakes every waiter, which then throws the
  // Health's error (like the TCP client). `health` must outlive this KV.
  explicit MemoryKV(Health *health = nullptr);
  ~MemoryKV() override;

  void set(const std::string &key, const std::string &value) override;
  std::string get(const std::string &key, int64_t timeout_ms) override;
  int64_t add(const std::string &key, int64_t delta) override;
  void wait(const std::vector<std::string> &keys, int64_t timeout_ms) override;

 private:
  // Waits until every key exists; throws HB_ERR_TIMEOUT or the Health's error.
  void wait_locked(std::unique_lock<std::mutex> &lock,
                   const std::vector<std::string> &keys, int64_t timeout_ms,
                   const char *what);

  Health *health_;
  int sub_id_ = -1;
  std::mutex mu_;
  std::condition_variable cv_;
  bool failed_ = false;
  std::map<std::string, std::string> kv_;
};

}  // namespace rdv
}  // namespace hb
