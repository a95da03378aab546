// A serving table that follows versions: deltas and newer full exports are
// applied while reader threads look up; every lookup must see exactly one
// version (each version's rows encode its number), versions only move
// forward, and bad or out-of-order files are refused with the served
// version intact. Run this binary under TSan too.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>

#include "abi/error.h"
#include "common/file_io.h"
#include "serving/export_format.h"
#include "serving/serving_table.h"

namespace {

using hb::serving::ExportHeader;
using hb::serving::ServingTable;

const int64_t kDim = 8, kIds = 3000;
const uint64_t kLineage = 0x1234;

std::string temp_path(const std::string &tag) {
  return "/tmp/hb_serving_swap_" + std::to_string(::getpid()) + "_" + tag;
}

// Version v holds id iff (id + v) % 5 != 0; every float of its row is
// v + id / 2^16 (exact in float for these ranges), so a row tells both
// its id and its version.
bool present(int64_t id, int64_t v) { return (id + v) % 5 != 0; }
float value(int64_t id, int64_t v) {
  return static_cast<float>(v) + static_cast<float>(id) / 65536.0f;
}

// Writes version v: full (base 0) or the delta from v - 1 (every row
// present in v updated, the ids absent in v but present in v - 1 evicted).
void write_version(const std::string &path, int64_t v, int64_t base,
                   uint64_t lineage = kLineage, const char *name = "t") {
  std::vector<unsigned char> recs;
  std::vector<int64_t> evicted;
  int64_t total = 0;
  for (int64_t id = 0; id < kIds; ++id) {
    if (!present(id, v)) {
      if (base && present(id, base)) evicted.push_back(id);
      continue;
    }
    ++total;
    size_t at = recs.size();
    recs.resize(at + 8 + 4 * kDim);
    std::memcpy(recs.data() + at, &id, 8);
    for (int64_t k = 0; k < kDim; ++k) {
      float f = value(id, v);
      std::memcpy(recs.data() + at + 8 + 4 * k, &f, 4);
    }
  }
  ExportHeader h;
  h.name = name;
  h.dim = kDim;
  h.version = v;
  h.base = base;
  h.lineage = lineage;
  h.total_rows = total;
  hb::serving::write_export(path, h, recs.data(), recs.size() / (8 + 4 * kDim),
                            8 + 4 * kDim, evicted);
}

// Checks that a lookup of ids returned exactly version v.
bool consistent(const std::vector<int64_t> &ids, const std::vector<float> &out,
                int64_t v) {
  for (size_t i = 0; i < ids.size(); ++i) {
    float want = present(ids[i], v) ? value(ids[i], v) : 0.0f;
    for (int64_t k = 0; k < kDim; ++k)
      if (out[i * kDim + k] != want) return false;
  }
  return true;
}

void expect_same_rows(const ServingTable &s, int64_t v) {
  int64_t n = 0;
  bool ok = true;
  s.for_each([&](int64_t id, const float *row) {
    ++n;
    ok = ok && present(id, v) && row[0] == value(id, v);
  });
  EXPECT_TRUE(ok);
  int64_t want = 0;
  for (int64_t id = 0; id < kIds; ++id) want += present(id, v);
  EXPECT_EQ(n, want);
}

TEST(ServingSwap, ChainOfDeltasAndFullExports) {
  std::string full = temp_path("full"), d = temp_path("delta");
  write_version(full, 1, 0);
  ServingTable s(full.c_str());
  EXPECT_EQ(s.version(), 1);
  for (int64_t v = 2; v <= 12; ++v) {
    if (v % 4 == 0)
      write_version(full, v, 0), s.update(full.c_str());
    else
      write_version(d, v, v - 1), s.update(d.c_str());
    EXPECT_EQ(s.version(), v);
    expect_same_rows(s, v);
    std::vector<int64_t> ids;
    for (int64_t id = 0; id < kIds; id += 7) ids.push_back(id);
    std::vector<float> out(ids.size() * kDim);
    EXPECT_EQ(s.lookup(ids.data(), ids.size(), out.data()), v);
    EXPECT_TRUE(consistent(ids, out, v));
  }
  ::unlink(full.c_str());
  ::unlink(d.c_str());
}

// Each refusal names what is wrong and leaves version 3 served.
TEST(ServingSwap, BadOrOutOfOrderFilesRefused) {
  std::string full = temp_path("rfull"), d = temp_path("rdelta");
  write_version(full, 3, 0);
  ServingTable s(full.c_str());
  auto refused = [&](const std::string &path, hb_status status,
                     const char *needle) {
    try {
      s.update(path.c_str());
      ADD_FAILURE() << "accepted: " << needle;
    } catch (const hb::Error &e) {
      EXPECT_EQ(e.status(), status) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
          << e.what();
    }
    EXPECT_EQ(s.version(), 3);
    expect_same_rows(s, 3);
  };
  write_version(d, 5, 4);  // skips version 4
  refused(d, HB_ERR_INVALID_ARGUMENT, "delta from version 4");
  write_version(d, 3, 2);  // older than served
  refused(d, HB_ERR_INVALID_ARGUMENT, "does not apply to the served version 3");
  write_version(d, 4, 3, kLineage + 1);  // another training run's delta
  refused(d, HB_ERR_INVALID_ARGUMENT, "lineage");
  write_version(d, 4, 3, kLineage, "other");
  refused(d, HB_ERR_INVALID_ARGUMENT, "holds table 'other'");
  write_version(full, 3, 0);  // not newer
  refused(full, HB_ERR_INVALID_ARGUMENT, "not newer");
  write_version(d, 4, 3);
  std::string good = hb::read_whole_file(d);
  auto damaged = [&](const std::string &data, hb_status st, const char *why) {
    std::ofstream(d, std::ios::binary | std::ios::trunc) << data;
    refused(d, st, why);
  };
  damaged(good.substr(0, good.size() - 100), HB_ERR_CORRUPT, "checksum");
  std::string flip = good;
  flip[good.size() / 2] ^= 0x10;
  damaged(flip, HB_ERR_CORRUPT, "checksum");
  damaged(good.substr(0, 30), HB_ERR_CORRUPT, "");
  std::string magic = good;
  magic[1] = 'X';
  damaged(magic, HB_ERR_CORRUPT, "magic");
  ::unlink(d.c_str());
  refused(d, HB_ERR_IO, "cannot open");
  // The intact delta still applies after all that.
  write_version(d, 4, 3);
  s.update(d.c_str());
  EXPECT_EQ(s.version(), 4);
  expect_same_rows(s, 4);
  // A delta cannot be opened on its own.
  try {
    ServingTable t(d.c_str());
    ADD_FAILURE();
  } catch (const hb::Error &e) {
    EXPECT_EQ(e.status(), HB_ERR_INVALID_ARGUMENT);
  }
  ::unlink(full.c_str());
  ::unlink(d.c_str());
}

// A delta whose row count disagrees with the table it is applied to (a
// damaged chain that still checksums) is refused before anything changes.
TEST(ServingSwap, RowCountMismatchRefused) {
  std::string full = temp_path("cfull"), d = temp_path("cdelta");
  write_version(full, 1, 0);
  ServingTable s(full.c_str());
  std::vector<unsigned char> rec(8 + 4 * kDim, 0);
  ExportHeader h;
  h.name = "t";
  h.dim = kDim;
  h.version = 2;
  h.base = 1;
  h.lineage = kLineage;
  h.total_rows = s.rows() + 5;  // inserts one id, claims five
  int64_t id = 1 << 20;
  std::memcpy(rec.data(), &id, 8);
  hb::serving::write_export(d, h, rec.data(), 1, rec.size(), {});
  try {
    s.update(d.c_str());
    ADD_FAILURE();
  } catch (const hb::Error &e) {
    EXPECT_EQ(e.status(), HB_ERR_CORRUPT) << e.what();
  }
  EXPECT_EQ(s.version(), 1);
  expect_same_rows(s, 1);
  ::unlink(full.c_str());
  ::unlink(d.c_str());
}

// The checker: 4 readers look up random batches while the main thread
// swaps through deltas and full exports. Every call must read one
// version, and a reader's versions never go back.
TEST(ServingSwap, NoLookupMixesVersions) {
  std::string full = temp_path("mfull");
  const int kVersions = 40;
  std::vector<std::string> files(kVersions + 1);
  write_version(full, 1, 0);
  for (int v = 2; v <= kVersions; ++v) {
    files[v] = temp_path("m" + std::to_string(v));
    write_version(files[v], v, v % 7 == 0 ? 0 : v - 1);
  }
  ServingTable s(full.c_str());
  std::atomic<bool> stop{false};
  std::atomic<int64_t> calls{0}, mixed{0}, backwards{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 4; ++r)
    readers.emplace_back([&, r] {
      std::vector<int64_t> ids(64);
      std::vector<float> out(ids.size() * kDim);
      uint64_t x = 88172645463325252ull + r;
      int64_t last = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        for (auto &id : ids) {
          x ^= x << 13, x ^= x >> 7, x ^= x << 17;
          id = static_cast<int64_t>(x % kIds);
        }
        int64_t v = s.lookup(ids.data(), ids.size(), out.data());
        if (!consistent(ids, out, v)) ++mixed;
        if (v < last) ++backwards;
        last = v;
        ++calls;
      }
    });
  for (int v = 2; v <= kVersions; ++v) {
    s.update(files[v].c_str());
    // Let the readers run a little on each version.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  stop = true;
  for (auto &t : readers) t.join();
  EXPECT_EQ(s.version(), kVersions);
  EXPECT_EQ(mixed.load(), 0);
  EXPECT_EQ(backwards.load(), 0);
  EXPECT_GT(calls.load(), kVersions);
  expect_same_rows(s, kVersions);
  ::unlink(full.c_str());
  for (int v = 2; v <= kVersions; ++v) ::unlink(files[v].c_str());
}

// The ids code: extreme and negative ids survive, order is enforced.
TEST(ServingSwap, IdCodingExtremes) {
  std::string path = temp_path("ids");
  std::vector<int64_t> ids = {INT64_MIN, -5, -1, 0, 1, 127, 128, INT64_MAX};
  std::vector<unsigned char> recs;
  for (int64_t id : ids) {
    size_t at = recs.size();
    recs.resize(at + 8 + 4);
    std::memcpy(recs.data() + at, &id, 8);
    float f = static_cast<float>(id % 1000);
    std::memcpy(recs.data() + at + 8, &f, 4);
  }
  ExportHeader h;
  h.name = "x";
  h.dim = 1;
  h.version = 1;
  h.total_rows = static_cast<int64_t>(ids.size());
  // Shuffled input: the writer sorts.
  std::vector<unsigned char> rev;
  for (size_t i = ids.size(); i-- > 0;)
    rev.insert(rev.end(), recs.begin() + i * 12, recs.begin() + i * 12 + 12);
  hb::serving::write_export(path, h, rev.data(), ids.size(), 12, {});
  hb::serving::ExportImage im = hb::serving::read_export(path);
  EXPECT_EQ(im.ids, ids);
  for (size_t i = 0; i < ids.size(); ++i)
    EXPECT_EQ(im.rows[i], static_cast<float>(ids[i] % 1000));
  ::unlink(path.c_str());
}

// Records in shard order (world ranks' ascending runs, as an export
// gathers them), in more runs than the writer merges, and in random
// order: ids ascending, each row beside its id.
TEST(ServingSwap, ExportOrdersRunsOfShards) {
  std::string path = temp_path("runs");
  const int64_t kRows = 3000;
  std::mt19937 rng(7);
  for (int world : {1, 2, 3, 4, 7, 300, 0}) {
    std::vector<int64_t> order;  // ids in record order
    for (int r = 0; r < std::max(world, 1); ++r)
      for (int64_t id = r; id < kRows; id += std::max(world, 1))
        order.push_back(id);
    if (world == 0) std::shuffle(order.begin(), order.end(), rng);
    std::vector<unsigned char> recs(order.size() * 12);
    for (size_t i = 0; i < order.size(); ++i) {
      const float f = static_cast<float>(order[i] * 3);
      std::memcpy(recs.data() + i * 12, &order[i], 8);
      std::memcpy(recs.data() + i * 12 + 8, &f, 4);
    }
    ExportHeader h;
    h.name = "x";
    h.dim = 1;
    h.version = 1;
    h.total_rows = kRows;
    hb::serving::write_export(path, h, recs.data(), order.size(), 12, {});
    hb::serving::ExportImage im = hb::serving::read_export(path);
    ASSERT_EQ(im.ids.size(), static_cast<size_t>(kRows)) << world;
    for (int64_t i = 0; i < kRows; ++i) {
      EXPECT_EQ(im.ids[i], i) << world;
      EXPECT_EQ(im.rows[i], static_cast<float>(i * 3)) << world;
    }
  }
  ::unlink(path.c_str());
}

}  // namespace
