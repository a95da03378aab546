// Collections of GPU tables (DeviceCollection) over the host implementation
// of the device operations, against the host collection on twin host
// tables: bit-equal pooled and unpooled outputs, rows and optimizer slots
// (every pooling mode, weights, empty bags and ranks, mixed dims,
// optimizers, wire dtypes, static and dynamic tables) at worlds 1-4, the
// same rounds and wire bytes, plan reuse and re-planning, and refusals of
// bad input on every rank. tests/gpu/gpu_collection_test.cc runs the same
// comparison on a real GPU through the public API.
#include "embedding/device_collection.h"  // first: HB_EXPERIMENTAL

#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <string>

#include "coll_test_util.h"
#include "host_device_ops.h"

using hb::emb::Collection;
using hb::emb::DeviceCollection;
using hb::emb::DeviceTable;
using hb::emb::Table;
using hbtest::CollCase;
using hbtest::HostDeviceOps;
using hbtest::JBatch;
using hbtest::ThreadWorld;

namespace {

using Errors = hbtest::FirstError;
using hbtest::Outcomes;

// Three thread worlds: host tables + host collection, GPU tables' host side
// + device collection, and the device operations' exchange.
struct Worlds {
  ThreadWorld host, dhost, dev;
  explicit Worlds(int w) : host(w), dhost(w), dev(w) {}
};

// One rank: twin tables, a host collection and a device collection, the
// GPU tables sharing one (host-simulated) device.
struct Rig {
  // The test's handle on the device; destroyed last, it checks for leaks.
  std::unique_ptr<HostDeviceOps> ops;
  std::vector<std::unique_ptr<Table>> host, ghost;
  std::vector<std::unique_ptr<DeviceTable>> gpu;
  std::unique_ptr<Collection> hc;
  std::unique_ptr<DeviceCollection> dc;

  Rig(Worlds &w, int r, const CollCase &c) {
    ops.reset(new HostDeviceOps(w.dev.endpoint(r),
                                std::make_shared<HostDeviceOps::Device>()));
    std::shared_ptr<HostDeviceOps::Device> device = ops->shared_device();
    std::vector<hb::emb::Feature> hf, df;
    for (const auto &cfg : c.tables) {
      hb_embedding_config gc = cfg;
      gc.device = 0;
      host.emplace_back(
          new Table(hb::emb::spec_from_config(&cfg), w.host.endpoint(r)));
      ghost.emplace_back(
          new Table(hb::emb::spec_from_config(&gc), w.dhost.endpoint(r)));
      gpu.emplace_back(new DeviceTable(*ghost.back(), [&] {
        return std::unique_ptr<hb::emb::DeviceOps>(
            new HostDeviceOps(w.dev.endpoint(r), device));
      }));
    }
    for (size_t f = 0; f < c.features.size(); ++f) {
      const int t = c.features[f].table;
      hf.push_back({c.names[f], host[t].get(), c.features[f].pooling});
      df.push_back(
          {c.names[f], ghost[t].get(), c.features[f].pooling, gpu[t].get()});
    }
    hc.reset(new Collection(hf, w.host.endpoint(r)));
    dc.reset(new DeviceCollection(df, w.dhost.endpoint(r)));
  }
  ~Rig() {
    dc.reset();
    gpu.clear();
  }
};

// A batch's arrays copied to the device, and output buffers there.
struct DevBatch {
  HostDeviceOps &ops;
  std::vector<void *> blocks;
  std::vector<const int64_t *> ids, offsets, lengths;
  std::vector<const float *> weights, grad_unpooled;
  std::vector<float *> unpooled;
  float *out = nullptr;
  const float *grad_out = nullptr;

  template <class T>
  T *put(const std::vector<T> &v, size_t count) {
    void *p = ops.alloc(std::max<size_t>(count * sizeof(T), 8));
    blocks.push_back(p);
    if (!v.empty()) ops.copy(p, v.data(), v.size() * sizeof(T));
    return static_cast<T *>(p);
  }
  DevBatch(HostDeviceOps &o, const JBatch &b, const CollCase &c) : ops(o) {
    const size_t F = c.features.size();
    for (size_t f = 0; f < F; ++f) {
      ids.push_back(put(b.ids[f], b.ids[f].size()));
      offsets.push_back(put(b.offsets[f], b.offsets[f].size()));
      lengths.push_back(put(b.lengths[f], b.lengths[f].size()));
      weights.push_back(b.weights[f].empty()
                            ? nullptr
                            : put(b.weights[f], b.weights[f].size()));
      const int64_t dim = c.tables[c.features[f].table].dim;
      const bool none = c.features[f].pooling == HB_POOLING_NONE;
      unpooled.push_back(none ? put(std::vector<float>(), b.n(f) * dim)
                              : nullptr);
      grad_unpooled.push_back(
          none ? put(b.grad_unpooled[f], b.grad_unpooled[f].size()) : nullptr);
    }
    out = put(std::vector<float>(), b.B * hbtest::coll_width(c));
    grad_out = put(b.grad_out, b.grad_out.size());
  }
  ~DevBatch() {
    ops.sync();
    for (void *p : blocks) ops.free(p);
  }
  // The batch's view with device arrays (the layout JBatch::view() picks).
  hb::emb::JaggedBatch view(const JBatch &b) {
    hb::emb::JaggedBatch j;
    j.batch = b.B;
    j.ids = ids.data();
    j.weights = weights.data();
    if (b.use_lengths) {
      // lengths: the ids start at ids[f][0]; skip the padding on the device
      lid.resize(ids.size());
      lw.resize(ids.size());
      for (size_t f = 0; f < ids.size(); ++f) {
        lid[f] = ids[f] + b.base[f];
        lw[f] = weights[f] ? weights[f] + b.base[f] : nullptr;
      }
      j.ids = lid.data();
      j.weights = lw.data();
      j.lengths = lengths.data();
    } else {
      j.offsets = offsets.data();
    }
    return j;
  }
  std::vector<const int64_t *> lid;
  std::vector<const float *> lw;

  template <class T>
  std::vector<T> get(const T *p, size_t n) {
    std::vector<T> v(n);
    ops.sync();
    if (n) ops.copy(v.data(), p, n * sizeof(T));
    ops.sync();
    return v;
  }
};

using hbtest::internal_view;

bool same_bits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         (a.empty() || !std::memcmp(a.data(), b.data(), a.size() * 4));
}

// The host collection's lookup of b, and the check of the device
// collection's outputs against it, bit for bit.
struct HostLookup {
  std::vector<float> out;
  std::vector<std::vector<float>> unp;
  std::vector<float *> up;
  HostLookup(Rig &g, const CollCase &c, JBatch &b)
      : out(b.B * hbtest::coll_width(c), -7.0f),
        unp(c.features.size()),
        up(c.features.size(), nullptr) {
    for (size_t f = 0; f < c.features.size(); ++f)
      if (c.features[f].pooling == HB_POOLING_NONE) {
        unp[f].assign(b.n(f) * c.tables[c.features[f].table].dim, -7.0f);
        up[f] = unp[f].data();
      }
    g.hc->lookup(internal_view(b), out.data(), up.data());
  }
  void check(DevBatch &d, const std::string &where, Errors &err) {
    if (!same_bits(out, d.get(d.out, out.size())))
      err.report(where + ": pooled output differs");
    for (size_t f = 0; f < up.size(); ++f)
      if (up[f] && !same_bits(unp[f], d.get(d.unpooled[f], unp[f].size())))
        err.report(where + ": unpooled output of feature " + std::to_string(f) +
                   " differs");
  }
};

// One lookup (unless `look` is NULL) and one update on both collections;
// outputs compared bit for bit.
void step_both(Rig &g, const CollCase &c, JBatch *look, JBatch &upd,
               const std::string &where, Errors &err) {
  const size_t F = c.features.size();
  if (look) {
    HostLookup host(g, c, *look);
    DevBatch d(*g.ops, *look, c);
    g.dc->lookup(d.view(*look), d.out, d.unpooled.data());
    host.check(d, where, err);
  }
  std::vector<const float *> gup(F);
  for (size_t f = 0; f < F; ++f) gup[f] = upd.grad_unpooled[f].data();
  g.hc->apply_gradients(internal_view(upd), upd.grad_out.data(), gup.data());
  DevBatch d(*g.ops, upd, c);
  g.dc->apply_gradients(d.view(upd), d.grad_out, d.grad_unpooled.data());
}

// Every record (weights, slots, Adam step count) and the creation order.
void compare_tables(Rig &g, const std::string &where, Errors &err) {
  for (size_t t = 0; t < g.gpu.size(); ++t) {
    g.gpu[t]->download();
    std::vector<int64_t> ia, ib;
    std::vector<float> ra, rb;
    const int64_t w = g.host[t]->shard().record_words();
    g.host[t]->shard().for_each([&](int64_t id, const float *r) {
      ia.push_back(id);
      ra.insert(ra.end(), r, r + w);
    });
    g.ghost[t]->shard().for_each([&](int64_t id, const float *r) {
      ib.push_back(id);
      rb.insert(rb.end(), r, r + w);
    });
    if (ia != ib)
      err.report(where + ": table " + std::to_string(t) + ": row ids differ");
    else if (!same_bits(ra, rb))
      err.report(where + ": table " + std::to_string(t) + ": records differ");
  }
}

// The counters both collections keep alike (owner_unique differs: the
// device collection counts received ids).
void compare_stats(Rig &g, const std::string &where, Errors &err) {
  const hb::emb::CollectionStats &a = g.hc->stats(), &b = g.dc->stats();
  if (a.lookups != b.lookups || a.updates != b.updates ||
      a.reused_plans != b.reused_plans || a.rounds != b.rounds ||
      a.ids != b.ids || a.unique_ids != b.unique_ids ||
      a.wire_bytes_sent != b.wire_bytes_sent ||
      a.wire_bytes_recv != b.wire_bytes_recv ||
      a.dedup_bound_bytes != b.dedup_bound_bytes)
    err.report(where + ": stats differ: rounds " + std::to_string(a.rounds) +
               " vs " + std::to_string(b.rounds) + ", reused " +
               std::to_string(a.reused_plans) + " vs " +
               std::to_string(b.reused_plans) + ", bytes sent " +
               std::to_string(a.wire_bytes_sent) + " vs " +
               std::to_string(b.wire_bytes_sent));
}

void check_world(int world, int steps, uint64_t seed, int partition = -1) {
  CollCase c = hbtest::standard_case();
  if (partition >= 0)
    for (auto &t : c.tables)
      if (t.num_rows > 0) t.partition = partition;
  std::mt19937_64 g(seed);
  std::vector<std::vector<JBatch>> plan;
  for (int s = 0; s < steps; ++s)
    plan.push_back(hbtest::make_step(g, c, world));
  Errors err;
  Worlds w(world);
  ThreadWorld::run(world, [&](int r) {
    Rig rig(w, r, c);
    const std::string rank = " rank " + std::to_string(r);
    for (int s = 0; s < steps; ++s)
      step_both(rig, c, &plan[s][r], plan[s][r],
                "step " + std::to_string(s) + rank, err);
    compare_tables(rig, "after training" + rank, err);
    compare_stats(rig, "after training" + rank, err);
    // One plan per step, reused by its update: 4 rounds per step.
    if (rig.dc->stats().rounds != 4u * steps ||
        rig.dc->stats().reused_plans != static_cast<uint64_t>(steps))
      err.report("rank " + std::to_string(r) + ": " +
                 std::to_string(rig.dc->stats().rounds) + " rounds");
  });
  EXPECT_EQ(err.first, "");
}

class DeviceCollectionWorld : public ::testing::TestWithParam<int> {};

TEST_P(DeviceCollectionWorld, BitEqualToTheHostCollection) {
  check_world(GetParam(), 5, 30 + GetParam());
}
TEST_P(DeviceCollectionWorld, BitEqualPartitionDiv) {
  check_world(GetParam(), 3, 40 + GetParam(), HB_PARTITION_DIV);
}
INSTANTIATE_TEST_SUITE_P(Worlds, DeviceCollectionWorld,
                         ::testing::Values(1, 2, 3, 4));

// Rank 1 updates other ids than it looked up: every rank plans again, on
// both collections alike; then a reused step and an update without lookup.
TEST(DeviceCollection, ReplansWhenUpdateIdsDiffer) {
  const int world = 3;
  CollCase c = hbtest::standard_case();
  std::mt19937_64 g(5);
  std::vector<JBatch> look = hbtest::make_step(g, c, world);
  std::vector<JBatch> upd = look;
  hbtest::shift_ids(upd[1], c);
  std::vector<JBatch> look2 = hbtest::make_step(g, c, world);
  std::vector<JBatch> empty;
  for (int r = 0; r < world; ++r) empty.push_back(hbtest::make_jbatch(g, c, 0));
  Errors err;
  Worlds w(world);
  ThreadWorld::run(world, [&](int r) {
    Rig rig(w, r, c);
    const std::string rank = " rank " + std::to_string(r);
    step_both(rig, c, &look[r], upd[r], "re-planned" + rank, err);
    if (rig.dc->stats().rounds != 7 || rig.dc->stats().reused_plans != 0)
      err.report("re-planned" + rank + ": " +
                 std::to_string(rig.dc->stats().rounds) + " rounds");
    step_both(rig, c, &look2[r], look2[r], "reused" + rank, err);
    if (rig.dc->stats().reused_plans != 1)
      err.report("reused" + rank + ": not reused");
    step_both(rig, c, nullptr, empty[r], "no lookup" + rank, err);
    if (rig.dc->stats().rounds != 7 + 4 + 3)
      err.report("no lookup" + rank + ": " +
                 std::to_string(rig.dc->stats().rounds) + " rounds");
    compare_tables(rig, "end" + rank, err);
    compare_stats(rig, "end" + rank, err);
  });
  EXPECT_EQ(err.first, "");
}

// The device collection's pipelined lookup (start, the previous batch's
// update, wait) against the host collection's unpipelined steps: the same
// outputs, rows and slots, bit for bit, in as many rounds.
TEST(DeviceCollection, PipelinedLookupIsBitEqualToTheHostCollection) {
  const int world = 3, steps = 4;
  CollCase c = hbtest::standard_case();
  std::mt19937_64 g(11);
  std::vector<std::vector<JBatch>> plan;
  for (int s = 0; s < steps; ++s)
    plan.push_back(hbtest::make_step(g, c, world));
  const size_t F = c.features.size();
  Errors err;
  Worlds w(world);
  ThreadWorld::run(world, [&](int r) {
    Rig rig(w, r, c);
    const std::string rank = " rank " + std::to_string(r);
    std::vector<std::unique_ptr<DevBatch>> dev;
    for (int s = 0; s < steps; ++s)
      dev.emplace_back(new DevBatch(*rig.ops, plan[s][r], c));
    auto start = [&](int s) {
      rig.dc->lookup_start(dev[s]->view(plan[s][r]), dev[s]->out,
                           dev[s]->unpooled.data());
    };
    start(0);
    for (int s = 0; s < steps; ++s) {
      JBatch &b = plan[s][r];
      HostLookup host(rig, c, b);
      rig.dc->lookup_wait();
      DevBatch &d = *dev[s];
      host.check(d, "step " + std::to_string(s) + rank, err);
      if (s + 1 < steps) start(s + 1);
      std::vector<const float *> gup(F);
      for (size_t f = 0; f < F; ++f) gup[f] = b.grad_unpooled[f].data();
      rig.hc->apply_gradients(internal_view(b), b.grad_out.data(), gup.data());
      rig.dc->apply_gradients(d.view(b), d.grad_out, d.grad_unpooled.data());
    }
    compare_tables(rig, "after training" + rank, err);
    compare_stats(rig, "after training" + rank, err);
    if (rig.dc->stats().rounds != 4u * steps ||
        rig.dc->stats().reused_plans != static_cast<uint64_t>(steps))
      err.report("rank " + std::to_string(r) + ": " +
                 std::to_string(rig.dc->stats().rounds) + " rounds");
  });
  EXPECT_EQ(err.first, "");
}

Outcomes run_failing(int world, const CollCase &c,
                     const std::function<void(int, Rig &)> &fn) {
  Worlds w(world);
  return hbtest::run_failing<Rig>(
      world, [&](int r) { return std::unique_ptr<Rig>(new Rig(w, r, c)); }, fn);
}

TEST(DeviceCollection, BadIdFailsEveryRankAndTheNextStepWorks) {
  CollCase c = hbtest::standard_case();
  std::mt19937_64 g(3);
  std::vector<JBatch> step = hbtest::make_step(g, c, 3);
  step[2] = hbtest::make_jbatch(g, c, 2);
  step[2].ids[0].back() = 1000;  // table ta has 50 rows
  std::vector<JBatch> next = hbtest::make_step(g, c, 3);
  std::vector<int> recovered(3, 0);
  Outcomes o = run_failing(3, c, [&](int r, Rig &rig) {
    DevBatch d(*rig.ops, step[r], c);
    try {
      rig.dc->lookup(d.view(step[r]), d.out, d.unpooled.data());
    } catch (const hb::Error &) {
      DevBatch d2(*rig.ops, next[r], c);
      rig.dc->lookup(d2.view(next[r]), d2.out, d2.unpooled.data());
      recovered[r] = 1;
      throw;
    }
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(o.st[r], HB_ERR_INVALID_ARGUMENT) << r;
    EXPECT_NE(o.msg[r].find("1000"), std::string::npos) << o.msg[r];
    EXPECT_EQ(recovered[r], 1) << r;
  }
  EXPECT_NE(o.msg[0].find("rank 2"), std::string::npos) << o.msg[0];
}

TEST(DeviceCollection, BadBagsFailEveryRank) {
  CollCase c = hbtest::standard_case();
  std::mt19937_64 g(4);
  for (int kind = 0; kind < 3; ++kind) {
    std::vector<JBatch> step;
    for (int r = 0; r < 2; ++r) step.push_back(hbtest::make_jbatch(g, c, 3));
    JBatch &b = step[0];
    b.use_lengths = kind == 2;
    if (kind == 0) b.offsets[2][2] = b.offsets[2][1] - 1;
    if (kind == 1) b.offsets[2][0] = -4;
    if (kind == 2) b.lengths[2][1] = -3;
    Outcomes o = run_failing(2, c, [&](int r, Rig &rig) {
      DevBatch d(*rig.ops, step[r], c);
      rig.dc->lookup(d.view(step[r]), d.out, d.unpooled.data());
    });
    const char *want[] = {"decrease at sample 1", "offsets[0] = -4",
                          "length -3 at sample 1"};
    EXPECT_EQ(o.st[0], HB_ERR_INVALID_ARGUMENT) << kind;
    EXPECT_NE(o.msg[0].find(want[kind]), std::string::npos) << o.msg[0];
    EXPECT_EQ(o.st[1], HB_ERR_INVALID_ARGUMENT) << kind;
    EXPECT_NE(o.msg[1].find("rank 0"), std::string::npos) << o.msg[1];
  }
}

TEST(DeviceCollection, HostBuffersAreRefusedOnEveryRank) {
  CollCase c = hbtest::standard_case();
  std::mt19937_64 g(6);
  std::vector<JBatch> step;
  for (int r = 0; r < 2; ++r) step.push_back(hbtest::make_jbatch(g, c, 3));
  for (int which = 0; which < 2; ++which) {
    Outcomes o = run_failing(2, c, [&](int r, Rig &rig) {
      DevBatch d(*rig.ops, step[r], c);
      hb::emb::JaggedBatch j = d.view(step[r]);
      std::vector<float> host_out(3 * hbtest::coll_width(c));
      std::vector<const int64_t *> host_ids(c.features.size());
      for (size_t f = 0; f < host_ids.size(); ++f)
        host_ids[f] =
            step[r].ids[f].data() + (step[r].use_lengths ? step[r].base[f] : 0);
      if (r == 1 && which == 0) j.ids = host_ids.data();
      rig.dc->lookup(j, r == 1 && which == 1 ? host_out.data() : d.out,
                     d.unpooled.data());
    });
    EXPECT_EQ(o.st[1], HB_ERR_INVALID_ARGUMENT) << which;
    EXPECT_NE(o.msg[1].find("host memory"), std::string::npos) << o.msg[1];
    EXPECT_EQ(o.st[0], HB_ERR_INVALID_ARGUMENT) << which;
    EXPECT_NE(o.msg[0].find("rank 1"), std::string::npos) << o.msg[0];
  }
}

// A dense buffer in a device collection's update (not implemented there):
// HB_ERR_UNSUPPORTED on the rank that passed it, the others told so in the
// same round; nothing hangs.
TEST(DeviceCollection, DenseSumIsUnsupportedOnEveryRank) {
  CollCase c = hbtest::standard_case();
  std::mt19937_64 g(7);
  std::vector<JBatch> step;
  for (int r = 0; r < 2; ++r) step.push_back(hbtest::make_jbatch(g, c, 3));
  std::vector<float> x(16, 1.0f);
  Outcomes o = run_failing(2, c, [&](int r, Rig &rig) {
    DevBatch d(*rig.ops, step[r], c);
    rig.dc->lookup(d.view(step[r]), d.out, d.unpooled.data());
    hb::emb::DenseSum dense;
    dense.send = x.data(), dense.recv = x.data(), dense.count = r == 0 ? 16 : 0;
    rig.dc->apply_gradients(d.view(step[r]), d.grad_out, d.grad_unpooled.data(),
                            &dense);
  });
  EXPECT_EQ(o.st[0], HB_ERR_UNSUPPORTED);
  EXPECT_NE(o.msg[0].find("GPU tables"), std::string::npos) << o.msg[0];
  EXPECT_EQ(o.st[1], HB_ERR_UNSUPPORTED);
  EXPECT_NE(o.msg[1].find("rank 0"), std::string::npos) << o.msg[1];
}

// A collection's tables all live on the host or all on the GPU.
TEST(DeviceCollection, MixingHostAndGpuTablesIsRefused) {
  CollCase c = hbtest::standard_case();
  Worlds w(1);
  Rig rig(w, 0, c);
  auto make = [&](std::vector<hb::emb::Feature> fs) -> std::string {
    try {
      DeviceCollection d(fs, w.dhost.endpoint(0));
      return "";
    } catch (const hb::Error &e) {
      return std::string(hb_status_name(e.status())) + ": " + e.what();
    }
  };
  std::string m =
      make({{"g", rig.ghost[0].get(), HB_POOLING_SUM, rig.gpu[0].get()},
            {"h", rig.host[1].get(), HB_POOLING_SUM}});
  EXPECT_NE(m.find("HB_ERR_UNSUPPORTED"), std::string::npos) << m;
  EXPECT_NE(m.find("all on the GPU"), std::string::npos) << m;
  EXPECT_EQ(make({{"g", rig.ghost[0].get(), HB_POOLING_SUM, rig.gpu[0].get()}}),
            "");
  // A host collection still refuses a GPU table.
  try {
    Collection h({{"g", rig.ghost[0].get(), HB_POOLING_SUM}},
                 w.dhost.endpoint(0));
    ADD_FAILURE() << "a host collection took a GPU table";
  } catch (const hb::Error &e) {
    EXPECT_EQ(e.status(), HB_ERR_UNSUPPORTED);
  }
}

}  // namespace
