// An in-process KV for threaded tests of modules that bootstrap through the
// store (several "ranks" as threads sharing one MemoryKV). Same semantics
// as the rendezvous server: blocking get/wait with timeouts naming the
// missing keys, atomic add on decimal values.
#pragma once

#include <memory>

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
  struct State;  // shared with the Health callback, which may outlive us

  Health *health_;
  int sub_id_ = -1;
  std::shared_ptr<State> st_;
};

}  // namespace rdv
}  // namespace hb
