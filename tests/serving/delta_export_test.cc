// Delta exports of a training table (3 ranks as threads): a chain full,
// delta, delta, ... applied to a serving table reproduces the training
// table bit for bit at every version (rows created by lookups, updated by
// gradient steps, evicted and created again), and equals a full export of
// the same rows; a delta holds only the changed rows (its size is checked
// against 1.1 x their bytes plus the evicted ids); bases that are too old
// or unknown are refused.
#define HB_EXPERIMENTAL 1  // hb_embedding_lifecycle
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <random>

#include "abi/error.h"
#include "embedding/harness.h"
#include "serving/export_table.h"
#include "serving/serving_table.h"

namespace {

using Rows = std::map<int64_t, std::vector<float>>;

std::string temp_path(const std::string &tag) {
  return "/tmp/hb_serving_delta_" + std::to_string(::getpid()) + "_" + tag;
}

hb_embedding_config config(int64_t num_rows) {
  hb_embedding_config c = HB_EMBEDDING_CONFIG_INIT;
  c.name = "delta";
  c.dim = 5;
  c.num_rows = num_rows;
  c.initializer = HB_INIT_UNIFORM;
  c.init_a = -1;
  c.init_b = 1;
  c.optimizer = HB_OPT_ADAGRAD;
  return c;
}

// What every rank holds, gathered (under mu) by the rank threads.
struct Gather {
  std::mutex mu;
  Rows rows;
  void add(const hb::emb::Table &t) {
    std::lock_guard<std::mutex> lk(mu);
    t.shard().for_each([&](int64_t id, const float *rec) {
      rows[id].assign(rec, rec + t.spec().dim);
    });
  }
};

Rows served(const hb::serving::ServingTable &s) {
  Rows r;
  s.for_each(
      [&](int64_t id, const float *row) { r[id].assign(row, row + s.dim()); });
  return r;
}

// A step: rank r looks up and trains a few ids of a skewed range; with
// manual_evict (a dynamic table without a lifecycle) it also evicts some
// of its rows as a lifecycle would (erase + log).
void step(hb::emb::Table &t, int r, int s, std::mt19937_64 &g,
          bool manual_evict = true) {
  const int64_t range = t.spec().num_rows ? t.spec().num_rows : 400;
  std::vector<int64_t> ids;
  for (int i = 0; i < 12; ++i) {
    int64_t id = static_cast<int64_t>(g() % (i < 6 ? 20 : range));
    ids.push_back(t.spec().num_rows ? id : id * 1000003 - 200000);
  }
  std::vector<float> out(ids.size() * t.spec().dim);
  std::vector<float> grad(out.size(), 0.125f * (r + 1));
  t.lookup(ids.data(), ids.size(), out.data());
  t.apply_gradients(ids.data(), ids.size(), grad.data());
  if (manual_evict && !t.spec().num_rows && s % 2 == 1) {
    std::vector<int64_t> mine;
    t.shard().for_each([&](int64_t id, const float *) {
      if ((id + s) % 7 == 0) mine.push_back(id);
    });
    for (int64_t id : mine)
      if (t.shard().erase(id) && t.row_meta()) t.row_meta()->on_evict(id);
  }
}

void chain(const hb_embedding_config &c, bool manual_evict) {
  const int64_t num_rows = c.num_rows;
  const std::string full = temp_path("full"), d = temp_path("d"),
                    check = temp_path("check");
  const int kVersions = 8;
  std::vector<Rows> truth(kVersions + 1);
  std::vector<uint64_t> delta_bytes(kVersions + 1);
  std::vector<Gather> gathers(kVersions + 1);
  std::unique_ptr<hb::serving::ServingTable> serving;
  std::vector<Rows> chained(kVersions + 1);
  std::vector<int64_t> changed(kVersions + 1), evicted(kVersions + 1);
  Gather final_rows;
  hbtest::run_tables(3, c, [&](int r, hb::emb::Table &t) {
    hb::serving::ExportHistory h;
    std::mt19937_64 g(17 + r);
    for (int v = 1; v <= kVersions; ++v) {
      for (int s = 0; s < 3; ++s) step(t, r, v * 3 + s, g, manual_evict);
      uint64_t bytes = hb::serving::export_version(
          t, h, (v == 1 ? full : d).c_str(), v, v == 1 ? 0 : v - 1, 16);
      gathers[v].add(t);
      // Rank 0 applies the file while the other ranks wait at the next
      // collective (the export's agreement already returned everywhere).
      if (r == 0) {
        delta_bytes[v] = bytes;
        if (v == 1) {
          serving.reset(new hb::serving::ServingTable(full.c_str()));
        } else {
          hb::serving::ExportImage im = hb::serving::read_export(d);
          changed[v] = static_cast<int64_t>(im.ids.size());
          evicted[v] = static_cast<int64_t>(im.evicted.size());
          serving->update(d.c_str());
        }
        chained[v] = served(*serving);
      }
    }
    // No writes since version 8: a full version 9 has the same rows.
    hb::serving::export_version(t, h, check.c_str(), kVersions + 1, 0, 16);
  });
  for (int v = 1; v <= kVersions; ++v) {
    EXPECT_EQ(chained[v], gathers[v].rows) << "version " << v;
    if (v > 1) {
      // The delta holds the rows changed since v - 1, not the table.
      EXPECT_GT(changed[v], 0);
      if (!c.lifecycle)  // a lifecycle's capacity may churn every row
        EXPECT_LT(changed[v], static_cast<int64_t>(gathers[v].rows.size()));
      const double row_bytes = 8.0 + 4.0 * c.dim;
      EXPECT_LE(static_cast<double>(delta_bytes[v]),
                1.1 * changed[v] * row_bytes + 8.0 * evicted[v] + 128)
          << "version " << v;
    }
  }
  if (!num_rows) {
    int64_t total = 0;
    for (int v = 2; v <= kVersions; ++v) total += evicted[v];
    EXPECT_GT(total, 0);
  }
  hb::serving::ServingTable fresh(check.c_str());
  EXPECT_EQ(served(fresh), chained[kVersions]);
  for (const auto &p : {full, d, check}) ::unlink(p.c_str());
}

TEST(DeltaExport, ChainReproducesStaticTable) { chain(config(300), false); }
TEST(DeltaExport, ChainReproducesDynamicTableWithEvictions) {
  chain(config(0), true);
}

// A table with a lifecycle (src/lifecycle): admission after 2 steps and a
// capacity of 90 rows (LRU, a boundary every apply) evict through the
// lifecycle's own path.
TEST(DeltaExport, ChainReproducesLifecycleTable) {
  hb_embedding_lifecycle lc = HB_EMBEDDING_LIFECYCLE_INIT;
  lc.admission = HB_ADMIT_COUNT;
  lc.min_count = 2;
  lc.max_rows = 90;
  lc.evict_interval = 1;
  hb_embedding_config c = config(0);
  c.lifecycle = &lc;
  chain(c, false);
}

TEST(DeltaExport, BasesTooOldOrUnknownRefused) {
  hb_embedding_config c = config(0);
  const std::string p = temp_path("old");
  hbtest::FirstError err;
  hbtest::run_tables(2, c, [&](int r, hb::emb::Table &t) {
    hb::serving::ExportHistory h;
    std::mt19937_64 g(5 + r);
    auto refused = [&](int64_t v, int64_t base, const char *needle) {
      try {
        hb::serving::export_version(t, h, p.c_str(), v, base, 3);
        err.report("accepted version " + std::to_string(v));
      } catch (const hb::Error &e) {
        if (e.status() != HB_ERR_INVALID_ARGUMENT ||
            std::string(e.what()).find(needle) == std::string::npos)
          err.report(e.what());
      }
    };
    refused(1, 0 + 1, "no versioned export");  // nothing exported yet
    for (int v = 1; v <= 5; ++v) {
      step(t, r, v, g);
      hb::serving::export_version(t, h, p.c_str(), v, v == 1 ? 0 : v - 1, 3);
    }
    // keep = 3: versions 3, 4, 5 are bases; 1 and 2 are too old.
    refused(6, 2, "older than the oldest base this table keeps (3");
    refused(6, 7, "never exported version 7");
    refused(5, 4, "versions must increase");
    hb::serving::export_version(t, h, p.c_str(), 6, 3, 3);  // still fine
  });
  EXPECT_EQ(err.first, "");
  ::unlink(p.c_str());
}

}  // namespace
