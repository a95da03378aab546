// The key-value interface that backends bootstrap through (Gloo pair
// addresses, NCCL unique ids). Implemented by rdv::Client over TCP and by
// rdv::MemoryKV for in-process tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hb {
namespace rdv {

class KV {
 public:
  virtual ~KV() = default;
  virtual void set(const std::string &key, const std::string &value) = 0;
  // Blocks until the key exists; HB_ERR_TIMEOUT naming the key.
  virtual std::string get(const std::string &key, int64_t timeout_ms) = 0;
  // Atomic add; returns the new value (a missing key counts as 0).
  virtual int64_t add(const std::string &key, int64_t delta) = 0;
  // Blocks until every key exists; HB_ERR_TIMEOUT naming the missing ones.
  virtual void wait(const std::vector<std::string> &keys,
                    int64_t timeout_ms) = 0;
  // The ranks that left on purpose (destroyed their context) while this
  // end was connected, first leaver first: a broken link is then a clean
  // leave, reported at once instead of waited on.
  virtual std::vector<int> ranks_left() const { return {}; }
};

}  // namespace rdv
}  // namespace hb
