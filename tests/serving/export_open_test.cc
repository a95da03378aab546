// Export files and the read-only serving table: contents equal the trained
// table, unknown ids read zeros and count as misses, bad files are
// rejected, and concurrent lookups are safe (run this binary under TSan).
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <mutex>
#include <thread>

#include "abi/error.h"
#include "common/file_io.h"
#include "embedding/harness.h"
#include "serving/export_table.h"
#include "serving/serving_table.h"

namespace {

std::string temp_path(const char *tag) {
  return "/tmp/hb_emb_serving_" + std::to_string(::getpid()) + "_" + tag;
}

hb_embedding_config config(int64_t num_rows) {
  hb_embedding_config c = HB_EMBEDDING_CONFIG_INIT;
  c.name = "serve";
  c.dim = 6;
  c.num_rows = num_rows;
  c.initializer = HB_INIT_NORMAL;
  c.init_b = 1.0;
  c.optimizer = HB_OPT_ADAGRAD;
  return c;
}

// Trains a 3-rank table, exports it to path, returns id -> weights.
std::map<int64_t, std::vector<float>> train_and_export(
    const hb_embedding_config &c, const std::string &path) {
  std::mutex mu;
  std::map<int64_t, std::vector<float>> rows;
  hbtest::run_tables(3, c, [&](int r, hb::emb::Table &t) {
    std::vector<int64_t> ids;
    for (int i = 0; i < 40; ++i)
      ids.push_back(c.num_rows ? (i * 7 + r) % c.num_rows
                               : -1000 + i * 37 * (r + 1));
    std::vector<float> g(ids.size() * c.dim, 0.25f), out(ids.size() * c.dim);
    t.lookup(ids.data(), ids.size(), out.data());
    t.apply_gradients(ids.data(), ids.size(), g.data());
    hb::serving::export_table(t, path.c_str());
    std::lock_guard<std::mutex> lk(mu);
    t.shard().for_each([&](int64_t id, const float *rec) {
      rows[id].assign(rec, rec + c.dim);
    });
  });
  return rows;
}

TEST(Serving, ExportOpenLookup) {
  for (int64_t num_rows : {int64_t{50}, int64_t{0}}) {
    hb_embedding_config c = config(num_rows);
    std::string path = temp_path("basic");
    auto rows = train_and_export(c, path);
    hb::serving::ServingTable s(path.c_str());
    EXPECT_EQ(s.dim(), c.dim);
    EXPECT_EQ(s.rows(), static_cast<int64_t>(rows.size()));
    EXPECT_EQ(s.name(), "serve");
    std::vector<int64_t> ids;
    for (auto &kv : rows) ids.push_back(kv.first);
    ids.push_back(123456789);  // unknown
    ids.push_back(ids[0]);
    std::vector<float> out(ids.size() * c.dim, -1.0f);
    s.lookup(ids.data(), ids.size(), out.data());
    for (size_t i = 0; i + 2 < ids.size(); ++i)
      EXPECT_EQ(
          std::memcmp(out.data() + i * c.dim, rows[ids[i]].data(), c.dim * 4),
          0);
    for (int64_t k = 0; k < c.dim; ++k)
      EXPECT_EQ(out[(ids.size() - 2) * c.dim + k], 0.0f);
    EXPECT_EQ(s.misses(), 1u);
    s.lookup(nullptr, 0, nullptr);
    ::unlink(path.c_str());
  }
}

TEST(Serving, BadFilesRejected) {
  hb_embedding_config c = config(30);
  std::string path = temp_path("bad");
  train_and_export(c, path);
  std::string good = hb::read_whole_file(path);
  auto expect_corrupt = [&](const std::string &data, const char *needle) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
    try {
      hb::serving::ServingTable s(path.c_str());
      ADD_FAILURE() << "accepted: " << needle;
    } catch (const hb::Error &e) {
      EXPECT_EQ(e.status(), HB_ERR_CORRUPT);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
          << e.what();
    }
  };
  expect_corrupt(good.substr(0, good.size() - 9), "checksum");
  std::string flipped = good;
  flipped[100] ^= 1;
  expect_corrupt(flipped, "checksum");
  std::string magic = good;
  magic[0] = 'X';
  expect_corrupt(magic, "magic");
  expect_corrupt("", "too short");
  ::unlink(path.c_str());
  try {
    hb::serving::ServingTable s(path.c_str());
    ADD_FAILURE();
  } catch (const hb::Error &e) {
    EXPECT_EQ(e.status(), HB_ERR_IO);
  }
}

TEST(Serving, ConcurrentLookups) {
  hb_embedding_config c = config(0);
  std::string path = temp_path("threads");
  auto rows = train_and_export(c, path);
  hb::serving::ServingTable s(path.c_str());
  std::vector<int64_t> known;
  for (auto &kv : rows) known.push_back(kv.first);
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  const int kThreads = 8, kIters = 200;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      std::vector<int64_t> ids;
      for (int i = 0; i < 64; ++i)
        ids.push_back(i % 2 ? known[(i * 13 + t) % known.size()] : 1 << 30 | i);
      std::vector<float> out(ids.size() * c.dim);
      for (int it = 0; it < kIters; ++it) {
        s.lookup(ids.data(), ids.size(), out.data());
        for (size_t i = 1; i < ids.size(); i += 2)
          if (std::memcmp(out.data() + i * c.dim, rows.at(ids[i]).data(),
                          c.dim * 4) != 0)
            ++bad;
      }
    });
  for (auto &t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(s.misses(), uint64_t{kThreads} * kIters * 32);
  ::unlink(path.c_str());
}

}  // namespace
