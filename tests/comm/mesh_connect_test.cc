// The TCP mesh's bootstrap (comm/mesh_connect.h) at 16 ranks as threads:
// what each rank reads from the store grows as O(N), not O(N^2) (Gloo's
// connectFullMesh read every peer's N-1 addresses: 30 KB per rank here,
// 145 GB over a 1024-rank world), and the world it forms reduces bit-exact.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "comm/backend.h"
#include "common/health.h"
#include "rendezvous/memory_kv.h"

namespace {

// Counts the bytes every get returns (the store's outbound traffic).
class CountingKV : public hb::rdv::KV {
 public:
  void set(const std::string &key, const std::string &value) override {
    kv_.set(key, value);
  }
  std::string get(const std::string &key, int64_t timeout_ms) override {
    std::string v = kv_.get(key, timeout_ms);
    read_ += v.size();
    return v;
  }
  int64_t add(const std::string &key, int64_t delta) override {
    return kv_.add(key, delta);
  }
  void wait(const std::vector<std::string> &keys, int64_t timeout_ms) override {
    kv_.wait(keys, timeout_ms);
  }
  size_t bytes_read() const { return read_; }

 private:
  hb::rdv::MemoryKV kv_;
  std::atomic<size_t> read_{0};
};

TEST(MeshConnect, SixteenTcpRanksReadLinearBytesAndReduceExactly) {
  const int n = 16;
  CountingKV kv;
  std::vector<hb::Health> health(n);
  std::vector<std::shared_ptr<hb::comm::Backend>> b(n);
  std::vector<std::vector<float>> out(n, std::vector<float>(257));
  std::vector<std::thread> threads;
  std::vector<std::string> errors(n);
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        hb::comm::BackendConfig cfg;
        cfg.transport = "tcp";
        cfg.key_prefix = "mesh_test/";
        cfg.world_size = n;
        cfg.rank = r;
        cfg.timeout_ms = 60000;
        b[r] = hb::comm::make_backend(cfg, &kv, health[r]);
        std::vector<float> in(out[r].size());
        for (size_t i = 0; i < in.size(); ++i)
          in[i] = 1.0f / float(1 + r + 3 * int(i));  // order-sensitive sums
        b[r]->allreduce(in.data(), out[r].data(), in.size(), HB_FLOAT32,
                        HB_SUM);
      } catch (const std::exception &e) {
        errors[r] = e.what();
      }
    });
  for (auto &t : threads) t.join();
  for (int r = 0; r < n; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  // Rank order, as hb's default algorithm folds.
  for (size_t i = 0; i < out[0].size(); ++i) {
    float want = 0;
    for (int q = 0; q < n; ++q) want += 1.0f / float(1 + q + 3 * int(i));
    for (int r = 0; r < n; ++r)
      ASSERT_EQ(out[r][i], want) << "rank " << r << " index " << i;
  }
  // Per rank: every host address (28 bytes) and a 2-byte port per peer and
  // context, plus the backend's other small keys. Gloo's exchange read
  // 2 x 15 keys of 15 x 136 bytes per rank (61 KB).
  const size_t per_rank = kv.bytes_read() / n;
  EXPECT_LT(per_rank, size_t(n) * 64) << "bytes read per rank";
  std::printf("[ note ] %zu bytes read from the store per rank at %d ranks\n",
              per_rank, n);
  for (auto &x : b) x.reset();
}

}  // namespace
