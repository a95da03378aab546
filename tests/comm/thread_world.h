// Runs the ranks of a world as threads of this process: each rank gets its
// own Health and a Backend built over one shared rdv::MemoryKV, exactly as
// processes would over the rendezvous store.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "abi/error.h"
#include "comm/backend.h"
#include "common/clock.h"
#include "common/health.h"
#include "rendezvous/memory_kv.h"

namespace hb {
namespace test {

class ThreadWorld {
 public:
  explicit ThreadWorld(int n, comm::BackendConfig base = comm::BackendConfig())
      : n_(n), health_(n), backends_(n) {
    static int instance = 0;
    base.key_prefix = "test/" + std::to_string(instance++) + "/";
    base.world_size = n;
    if (base.timeout_ms > 60000) base.timeout_ms = 60000;  // a hang fails fast
    run([&](int r) {
      comm::BackendConfig cfg = base;
      cfg.rank = r;
      backends_[r] = comm::make_backend(cfg, &kv_, health_[r]);
    });
  }
  ~ThreadWorld() {
    for (auto &b : backends_) b.reset();
  }

  int size() const { return n_; }
  comm::Backend &at(int r) { return *backends_[r]; }
  Health &health(int r) { return health_[r]; }
  void drop(int r) { backends_[r].reset(); }

  // Runs fn(rank) on one thread per rank; returns each rank's status
  // (exceptions become statuses, as at the ABI).
  std::vector<hb_status> try_run(const std::function<void(int)> &fn,
                                 std::vector<std::string> *messages = nullptr) {
    std::vector<hb_status> st(n_, HB_OK);
    std::vector<std::string> msg(n_);
    std::vector<std::thread> threads;
    for (int r = 0; r < n_; ++r)
      threads.emplace_back([&, r] {
        st[r] = guard([&] { fn(r); });
        if (st[r] != HB_OK) msg[r] = hb_last_error();
      });
    for (auto &t : threads) t.join();
    if (messages) *messages = msg;
    return st;
  }
  // As try_run, but every rank must succeed.
  void run(const std::function<void(int)> &fn) {
    std::vector<std::string> msg;
    auto st = try_run(fn, &msg);
    for (int r = 0; r < n_; ++r)
      if (st[r] != HB_OK) fail(st[r], "rank %d failed: %s", r, msg[r].c_str());
  }

 private:
  int n_;
  rdv::MemoryKV kv_;
  std::vector<Health> health_;
  std::vector<std::shared_ptr<comm::Backend>> backends_;
};

// One rank's backend made alone: for configurations that fail before any
// peer is needed. Returns the status (HB_OK if it was made).
inline hb_status make_backend_alone(const comm::BackendConfig &cfg) {
  Health h;
  rdv::MemoryKV kv;
  return guard([&] { comm::make_backend(cfg, &kv, h); });
}

}  // namespace test
}  // namespace hb
