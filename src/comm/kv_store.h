// Gloo's rendezvous Store interface over hb's rendezvous KV (the libuv
// store client, or MemoryKV in tests): Gloo bootstraps its TCP full mesh
// through the same store as everything else, never a file or Redis store.
#pragma once

#include <gloo/rendezvous/store.h>

#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/kv.h"

namespace hb {
namespace comm {

class KVStore : public gloo::rendezvous::Store {
 public:
  KVStore(rdv::KV &kv, std::string prefix, int64_t timeout_ms)
      : kv_(kv), prefix_(std::move(prefix)), timeout_ms_(timeout_ms) {}

  void set(const std::string &key, const std::vector<char> &data) override {
    kv_.set(prefix_ + key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string &key) override {
    std::string v = kv_.get(prefix_ + key, timeout_ms_);
    return std::vector<char>(v.begin(), v.end());
  }
  void wait(const std::vector<std::string> &keys) override {
    wait(keys, std::chrono::milliseconds(timeout_ms_));
  }
  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &timeout) override {
    std::vector<std::string> full;
    full.reserve(keys.size());
    for (const auto &k : keys) full.push_back(prefix_ + k);
    kv_.wait(full, timeout.count() > 0 ? timeout.count() : timeout_ms_);
  }

 private:
  rdv::KV &kv_;
  std::string prefix_;
  int64_t timeout_ms_;
};

}  // namespace comm
}  // namespace hb
