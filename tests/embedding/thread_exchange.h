// Simulates k ranks in one process: each rank is a thread with its own
// Exchange endpoint; a collective publishes every rank's send buffer,
// waits for all, copies its blocks, and waits again before buffers may be
// reused. Lets the table's collective logic run without a network.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/agreement.h"

namespace hbtest {

class ThreadWorld {
 public:
  explicit ThreadWorld(int world) : world_(world), posts_(world) {}

  // self_bytes, if given, adds up the bytes this endpoint's alltoallv
  // calls send to their own rank (tests that an exchange skips them).
  std::unique_ptr<hb::Exchange> endpoint(
      int rank, std::atomic<int64_t> *self_bytes = nullptr);

  // Runs fn(rank) on `world` threads and joins them.
  static void run(int world, const std::function<void(int)> &fn) {
    std::vector<std::thread> ts;
    for (int r = 0; r < world; ++r) ts.emplace_back(fn, r);
    for (auto &t : ts) t.join();
  }

  struct Post {
    const unsigned char *send = nullptr;
    std::vector<int64_t> offsets;  // byte offset of each peer's block
  };

  void barrier() {
    std::unique_lock<std::mutex> lk(mu_);
    uint64_t gen = gen_;
    if (++arrived_ == world_) {
      arrived_ = 0;
      ++gen_;
      cv_.notify_all();
    } else {
      cv_.wait(lk, [&] { return gen_ != gen; });
    }
  }

  int world_;
  std::vector<Post> posts_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t gen_ = 0;
};

class ThreadExchange : public hb::Exchange {
 public:
  ThreadExchange(ThreadWorld *w, int rank, std::atomic<int64_t> *self_bytes)
      : w_(w), rank_(rank), self_bytes_(self_bytes) {}
  int rank() const override { return rank_; }
  int world() const override { return w_->world_; }
  void alltoall(const int64_t *send, int64_t *recv, size_t k) override {
    std::vector<int64_t> b(world(), static_cast<int64_t>(k * 8));
    move(send, b.data(), recv, b.data());
  }
  void alltoallv(const void *send, const int64_t *send_bytes, void *recv,
                 const int64_t *recv_bytes) override {
    if (self_bytes_) *self_bytes_ += send_bytes[rank_];
    move(send, send_bytes, recv, recv_bytes);
  }

 private:
  void move(const void *send, const int64_t *send_bytes, void *recv,
            const int64_t *recv_bytes) {
    int n = world();
    ThreadWorld::Post &mine = w_->posts_[rank_];
    mine.send = static_cast<const unsigned char *>(send);
    mine.offsets.assign(n + 1, 0);
    for (int p = 0; p < n; ++p)
      mine.offsets[p + 1] = mine.offsets[p] + send_bytes[p];
    w_->barrier();
    unsigned char *out = static_cast<unsigned char *>(recv);
    for (int p = 0; p < n; ++p) {
      const ThreadWorld::Post &src = w_->posts_[p];
      int64_t len = src.offsets[rank_ + 1] - src.offsets[rank_];
      if (len != recv_bytes[p]) std::abort();  // protocol bug
      if (len) std::memcpy(out, src.send + src.offsets[rank_], len);
      out += len;
    }
    w_->barrier();
  }

  ThreadWorld *w_;
  int rank_;
  std::atomic<int64_t> *self_bytes_;
};

inline std::unique_ptr<hb::Exchange> ThreadWorld::endpoint(
    int rank, std::atomic<int64_t> *self_bytes) {
  return std::unique_ptr<hb::Exchange>(
      new ThreadExchange(this, rank, self_bytes));
}

}  // namespace hbtest
