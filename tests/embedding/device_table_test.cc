// The GPU table's orchestration (DeviceTable) over the host implementation
// of its device operations, against the host Table: bit-equal lookups,
// rows, optimizer slots and checkpoints both ways, at world sizes 1-4
// (threads), every optimizer, MOD / DIV / dynamic tables, Zipf ids with
// duplicates and empty ranks. tests/gpu/gpu_embedding_test.cc runs the same
// comparison on a real GPU through the public API.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <climits>
#include <filesystem>
#include <mutex>
#include <string>
#include <tuple>

#include "abi/error.h"
#include "embedding/checkpoint.h"
#include "embedding/device_table.h"
#include "harness.h"
#include "host_device_ops.h"
#include "temp_dirs.h"

using hbtest::Batch;
using hbtest::HostDeviceOps;
using hbtest::ThreadWorld;

namespace {

std::string temp_dir(const char *tag) {
  return hbtest::temp_dir("hb_devemb", tag);
}

hb_embedding_config config(int opt, int64_t num_rows, int partition) {
  hb_embedding_config c = HB_EMBEDDING_CONFIG_INIT;
  c.name = "dev";
  c.dim = 6;
  c.num_rows = num_rows;
  c.partition = partition;
  c.initializer = HB_INIT_NORMAL;
  c.init_b = 0.3;
  c.seed = 17;
  c.optimizer = opt;
  c.learning_rate = 0.05;
  c.l1 = 0.01;
  c.l2 = 0.02;
  return c;
}

// A caller's device buffer (ids, out, grads) in the host ops' memory.
struct DevBuf {
  HostDeviceOps &ops;
  void *p;
  DevBuf(HostDeviceOps &o, size_t bytes)
      : ops(o), p(o.alloc(std::max<size_t>(bytes, 8))) {}
  ~DevBuf() {
    ops.sync();
    ops.free(p);
  }
  template <class T>
  T *put(const std::vector<T> &v) {
    if (!v.empty()) ops.copy(p, v.data(), v.size() * sizeof(T));
    return static_cast<T *>(p);
  }
  template <class T>
  std::vector<T> get(size_t n) {
    std::vector<T> v(n);
    ops.sync();  // the table's last kernels, then the download
    if (n) ops.copy(v.data(), p, n * sizeof(T));
    ops.sync();
    return v;
  }
};

// One rank's GPU-table rig: the host Table and the DeviceTable over host
// ops (each on its own thread world, so they never mix with the CPU
// table's collectives).
struct DevRig {
  hb::emb::Table host;
  HostDeviceOps *ops = nullptr;
  std::unique_ptr<hb::emb::DeviceTable> dt;
  DevRig(const hb::emb::Spec &spec, ThreadWorld &hw, ThreadWorld &dw, int r)
      : host(spec, hw.endpoint(r)) {
    dt.reset(new hb::emb::DeviceTable(host, [&] {
      auto o = std::make_unique<HostDeviceOps>(dw.endpoint(r));
      ops = o.get();
      return std::unique_ptr<hb::emb::DeviceOps>(std::move(o));
    }));
  }
};

bool same_bits(const float *a, const float *b, size_t n) {
  return n == 0 || std::memcmp(a, b, n * 4) == 0;
}

using Checker = hbtest::FirstError;

// One step on both tables: lookups compared bit for bit, then the update.
void step_both(hb::emb::Table &cpu, DevRig &g, const Batch &b, int64_t dim,
               const std::string &where, Checker &chk) {
  const size_t n = b.ids.size();
  std::vector<float> want(n * dim, -7.0f);
  cpu.lookup(b.ids.data(), n, want.data());
  DevBuf ids(*g.ops, n * 8), out(*g.ops, n * dim * 4),
      grads(*g.ops, n * dim * 4);
  g.dt->lookup(n ? ids.put(b.ids) : nullptr, n,
               n ? static_cast<float *>(out.p) : nullptr);
  std::vector<float> got = out.get<float>(n * dim);
  if (!same_bits(got.data(), want.data(), n * dim))
    chk.report(where + ": lookup differs");
  cpu.apply_gradients(b.ids.data(), n, b.grads.data());
  g.dt->apply_gradients(n ? static_cast<int64_t *>(ids.p) : nullptr, n,
                        n ? grads.put(b.grads) : nullptr);
}

// Every record (weights, slots, Adam step count) and the creation order.
void compare_shards(const hb::emb::Shard &a, const hb::emb::Shard &b,
                    const std::string &where, Checker &chk) {
  std::vector<int64_t> ia, ib;
  std::vector<float> ra, rb;
  const int64_t w = a.record_words();
  a.for_each([&](int64_t id, const float *r) {
    ia.push_back(id);
    ra.insert(ra.end(), r, r + w);
  });
  b.for_each([&](int64_t id, const float *r) {
    ib.push_back(id);
    rb.insert(rb.end(), r, r + w);
  });
  if (ia != ib) return chk.report(where + ": row ids / order differ");
  if (!same_bits(ra.data(), rb.data(), ra.size()))
    chk.report(where + ": records differ");
}

// One rank of a host table and a GPU table trained side by side (each
// over its own thread world; the worlds for more tables on the rank).
struct Rank {
  int r;
  std::string name;  // " rank r", for messages
  ThreadWorld &cw, &hw, &dw;
  hb::emb::Table &cpu;
  DevRig &gpu;
};

void run_both(int world, const hb::emb::Spec &cpu_spec,
              const hb::emb::Spec &gpu_spec,
              const std::function<void(Rank &)> &fn) {
  ThreadWorld cw(world), hw(world), dw(world);
  ThreadWorld::run(world, [&](int r) {
    hb::emb::Table cpu(cpu_spec, cw.endpoint(r));
    DevRig g(gpu_spec, hw, dw, r);
    Rank k{r, " rank " + std::to_string(r), cw, hw, dw, cpu, g};
    fn(k);
  });
}

// The spec of config c on device 0.
hb::emb::Spec on_device(hb_embedding_config c) {
  c.device = 0;
  return hb::emb::spec_from_config(&c);
}

// Loads checkpoint `dir` into a new GPU table, trains it and cpu on
// `steps`, and compares the shards.
void load_train_compare(Rank &k, const hb::emb::Spec &gpu_spec,
                        const std::string &dir,
                        const std::vector<const Batch *> &steps, int64_t dim,
                        const std::string &what, Checker &chk) {
  DevRig g(gpu_spec, k.hw, k.dw, k.r);
  hb::emb::load_checkpoint(g.host, dir.c_str());
  g.dt->upload();
  for (size_t s = 0; s < steps.size(); ++s)
    step_both(k.cpu, g, *steps[s], dim, what + ", step " + std::to_string(s),
              chk);
  g.dt->download();
  compare_shards(k.cpu.shard(), g.host.shard(), what, chk);
}

class DeviceBitEqual
    : public ::testing::TestWithParam<std::tuple<int, int, int, hb_dtype>> {};

TEST_P(DeviceBitEqual, MatchesHostTableAndCheckpointsInterchange) {
  const int world = std::get<0>(GetParam()), opt = std::get<1>(GetParam()),
            kind = std::get<2>(GetParam());
  const int64_t num_rows = kind == 2 ? 0 : 97;
  hb_embedding_config c =
      config(opt, num_rows, kind == 1 ? HB_PARTITION_DIV : HB_PARTITION_MOD);
  c.wire_dtype = std::get<3>(GetParam());
  const hb::emb::Spec cpu_spec = hb::emb::spec_from_config(&c),
                      gpu_spec = on_device(c);
  hbtest::Plan plan = hbtest::make_plan(1000 + world * 10 + opt, world, 30, c);
  hbtest::Plan more = hbtest::make_plan(7 + world, world, 6, c);
  const std::string gpu_ckpt = temp_dir("g"), cpu_ckpt = temp_dir("c");

  Checker chk;
  run_both(world, cpu_spec, gpu_spec, [&](Rank &k) {
    hb::emb::Table &cpu = k.cpu;
    DevRig &g = k.gpu;
    const int r = k.r;
    const std::string &rank = k.name;
    for (size_t s = 0; s < plan.size(); ++s)
      step_both(cpu, g, plan[s][r], c.dim, "step " + std::to_string(s) + rank,
                chk);
    g.dt->download();
    compare_shards(cpu.shard(), g.host.shard(), "after training" + rank, chk);

    // Save from the GPU table, load into a new host table.
    hb::emb::save_checkpoint(g.host, gpu_ckpt.c_str());
    hb::emb::Table cpu2(cpu_spec, k.cw.endpoint(r));
    hb::emb::load_checkpoint(cpu2, gpu_ckpt.c_str());
    compare_shards(cpu.shard(), cpu2.shard(), "GPU save -> host load" + rank,
                   chk);
    // Save from the host table, load into a new GPU table, train on.
    hb::emb::save_checkpoint(cpu, cpu_ckpt.c_str());
    std::vector<const Batch *> steps;
    for (const auto &step : more) steps.push_back(&step[r]);
    load_train_compare(k, gpu_spec, cpu_ckpt, steps, c.dim,
                       "host save -> GPU load" + rank, chk);
  });
  EXPECT_EQ(chk.first, "");
}

std::string case_name(
    const ::testing::TestParamInfo<std::tuple<int, int, int, hb_dtype>> &info) {
  const char *opts[] = {"sgd", "adagrad", "adam", "ftrl"};
  const char *kinds[] = {"mod", "div", "dynamic"};
  const hb_dtype wire = std::get<3>(info.param);
  return std::string(opts[std::get<1>(info.param)]) + "_" +
         kinds[std::get<2>(info.param)] + "_" +
         (wire == HB_FLOAT32   ? "f32"
          : wire == HB_FLOAT16 ? "f16"
                               : "bf16") +
         "_w" + std::to_string(std::get<0>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    All, DeviceBitEqual,
    ::testing::Combine(::testing::Values(1, 2, 3, 4),
                       ::testing::Values(HB_OPT_SGD, HB_OPT_ADAGRAD,
                                         HB_OPT_ADAM, HB_OPT_FTRL),
                       ::testing::Values(0, 1, 2),
                       ::testing::Values(HB_FLOAT32, HB_FLOAT16, HB_BFLOAT16)),
    case_name);

// One lookup and one update of b: the bytes each copied to the host.
void d2h_per_call(DevRig &g, const Batch &b, int64_t dim,
                  std::vector<size_t> &bytes) {
  const size_t n = b.ids.size();
  DevBuf ids(*g.ops, n * 8), out(*g.ops, n * dim * 4),
      grads(*g.ops, n * dim * 4);
  int64_t *d_ids = n ? ids.put(b.ids) : nullptr;
  const float *d_grads = n ? grads.put(b.grads) : nullptr;
  size_t before = g.ops->d2h_bytes();
  g.dt->lookup(d_ids, n, n ? static_cast<float *>(out.p) : nullptr);
  g.ops->sync();
  bytes.push_back(g.ops->d2h_bytes() - before);
  before = g.ops->d2h_bytes();
  g.dt->apply_gradients(d_ids, n, d_grads);
  g.ops->sync();
  bytes.push_back(g.ops->d2h_bytes() - before);
}

// A static table's step copies no ids to the host: per lookup or update,
// the device-to-host traffic is the plan's per-peer counts and first-bad
// position, (world + 1) int64.
TEST(DevicePlanOnDevice, StaticTablesCopyOnlyCountsToTheHost) {
  for (int partition : {HB_PARTITION_MOD, HB_PARTITION_DIV}) {
    const int world = 3;
    hb_embedding_config c = config(HB_OPT_ADAGRAD, 97, partition);
    c.device = 0;
    const hb::emb::Spec spec = hb::emb::spec_from_config(&c);
    hbtest::Plan plan = hbtest::make_plan(77 + partition, world, 5, c);
    ThreadWorld hw(world), dw(world);
    std::vector<std::vector<size_t>> per_call(world);
    ThreadWorld::run(world, [&](int r) {
      DevRig g(spec, hw, dw, r);
      for (const auto &step : plan)
        d2h_per_call(g, step[r], c.dim, per_call[r]);
    });
    for (int r = 0; r < world; ++r)
      EXPECT_EQ(per_call[r],
                std::vector<size_t>(2 * plan.size(), (world + 1) * 8))
          << "rank " << r << " partition " << partition;
  }
}

// Dynamic tables map ids on the device (device_id_map.h). Many new ids per
// step grow the map's hash table, its row -> id array and the records
// several times; every initializer; the extreme ids (INT64_MIN is the map's
// empty-key marker); a download in the middle of training (the host shard
// catches up twice) and a GPU save -> GPU load that trains on. Lookups,
// records and creation order stay bit-equal to the host table.
class DynamicOnDevice : public ::testing::TestWithParam<std::tuple<int, int>> {
};

TEST_P(DynamicOnDevice, NewIdsGrowTheDeviceMapBitEqual) {
  const int world = std::get<0>(GetParam()), init = std::get<1>(GetParam());
  hb_embedding_config c = config(HB_OPT_ADAM, 0, HB_PARTITION_MOD);
  c.initializer = init;
  c.init_a = init == HB_INIT_NORMAL ? 0.1 : -0.25;
  c.init_b = init == HB_INIT_NORMAL ? 0.3 : 0.5;
  const hb::emb::Spec cpu_spec = hb::emb::spec_from_config(&c),
                      gpu_spec = on_device(c);
  hbtest::Plan plan = hbtest::make_plan(500 + world, world, 24, c, 4000);
  for (int64_t id : {INT64_MIN, INT64_MAX, int64_t{-1}, int64_t{0}, INT64_MIN})
    for (hbtest::Batch &b : plan[3]) {
      b.ids.push_back(id);
      b.grads.insert(b.grads.end(), c.dim, 0.25f);
    }
  const std::string ckpt = temp_dir("dyn");

  Checker chk;
  run_both(world, cpu_spec, gpu_spec, [&](Rank &k) {
    hb::emb::Table &cpu = k.cpu;
    for (size_t s = 0; s < plan.size(); ++s) {
      step_both(cpu, k.gpu, plan[s][k.r], c.dim,
                "step " + std::to_string(s) + k.name, chk);
      if (s == 5) {
        k.gpu.dt->download();
        compare_shards(cpu.shard(), k.gpu.host.shard(), "at step 5" + k.name,
                       chk);
      }
    }
    k.gpu.dt->download();
    compare_shards(cpu.shard(), k.gpu.host.shard(), "after training" + k.name,
                   chk);
    if (k.r == 0 && cpu.shard().rows() < 100)  // past 64: every buffer grew
      chk.report("too few rows to grow the map: " +
                 std::to_string(cpu.shard().rows()));

    hb::emb::save_checkpoint(k.gpu.host, ckpt.c_str());
    std::vector<const Batch *> steps;
    for (size_t s = 0; s < 6; ++s) steps.push_back(&plan[(s * 5) % 24][k.r]);
    load_train_compare(k, gpu_spec, ckpt, steps, c.dim,
                       "GPU save -> GPU load" + k.name, chk);
  });
  EXPECT_EQ(chk.first, "");
}

std::string dynamic_case_name(
    const ::testing::TestParamInfo<std::tuple<int, int>> &info) {
  const char *inits[] = {"zeros", "constant", "uniform", "normal"};
  return std::string(inits[std::get<1>(info.param)]) + "_w" +
         std::to_string(std::get<0>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    All, DynamicOnDevice,
    ::testing::Combine(::testing::Values(1, 2, 3, 4),
                       ::testing::Values(HB_INIT_ZEROS, HB_INIT_CONSTANT,
                                         HB_INIT_UNIFORM, HB_INIT_NORMAL)),
    dynamic_case_name);

// A dynamic table's step copies no ids to the host either: the plan's
// (world + 1) int64 and, after a call that mapped ids (every lookup; an
// update whose owner received ids), the device map's row count, 8 bytes.
TEST(DynamicOnDevice, CopiesOnlyCountsToTheHost) {
  const int world = 3;
  hb_embedding_config c = config(HB_OPT_FTRL, 0, HB_PARTITION_MOD);
  c.device = 0;
  const hb::emb::Spec spec = hb::emb::spec_from_config(&c);
  hbtest::Plan plan = hbtest::make_plan(91, world, 8, c, 3000);
  ThreadWorld hw(world), dw(world);
  std::vector<std::vector<size_t>> per_call(world), want(world);
  std::vector<int64_t> rows(world, 0);
  ThreadWorld::run(world, [&](int r) {
    DevRig g(spec, hw, dw, r);
    bool mapped = false;  // did the last call map ids?
    for (const auto &step : plan) {
      bool receives = false;  // does any rank send rank r an id?
      for (const Batch &b : step)
        for (int64_t id : b.ids)
          receives |=
              static_cast<uint64_t>(id) % world == static_cast<uint64_t>(r);
      want[r].push_back((world + (mapped ? 2 : 1)) * 8);
      want[r].push_back((world + 2) * 8);  // after the lookup's mapping
      mapped = receives;
      d2h_per_call(g, step[r], c.dim, per_call[r]);
    }
    // The rows exist all the same: a download brings them to the host.
    g.dt->download();
    rows[r] = g.host.shard().rows();
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(per_call[r], want[r]) << "rank " << r;
    EXPECT_GT(rows[r], 20) << "rank " << r;
  }
}

// Runs fn(rank, rig) on 3 ranks and returns each rank's status and message.
std::vector<std::pair<hb_status, std::string>> on_three(
    const hb_embedding_config &c,
    const std::function<void(int, DevRig &)> &fn) {
  ThreadWorld hw(3), dw(3);
  hb::emb::Spec spec = hb::emb::spec_from_config(&c);
  std::vector<std::pair<hb_status, std::string>> res(3, {HB_OK, ""});
  ThreadWorld::run(3, [&](int r) {
    try {
      DevRig g(spec, hw, dw, r);
      fn(r, g);
    } catch (const hb::Error &e) {
      res[r] = {e.status(), e.what()};
    }
  });
  return res;
}

TEST(DeviceErrors, BadIdFailsEveryRankAndTheTableStaysUsable) {
  hb_embedding_config c = config(HB_OPT_SGD, 20, HB_PARTITION_MOD);
  c.device = 0;
  std::vector<int> after(3, 0);
  auto res = on_three(c, [&](int r, DevRig &g) {
    std::vector<int64_t> ids = {1, 2, r == 1 ? 1000 : 3};
    DevBuf d_ids(*g.ops, 24), out(*g.ops, 3 * c.dim * 4);
    try {
      g.dt->lookup(d_ids.put(ids), 3, static_cast<float *>(out.p));
    } catch (const hb::Error &e) {
      // Every rank fails, naming the id; the next step still works.
      EXPECT_EQ(e.status(), HB_ERR_INVALID_ARGUMENT);
      EXPECT_NE(std::string(e.what()).find("1000"), std::string::npos)
          << e.what();
      ids[2] = 4;
      g.dt->lookup(d_ids.put(ids), 3, static_cast<float *>(out.p));
      after[r] = 1;
    }
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(res[r].first, HB_OK) << res[r].second;
    EXPECT_EQ(after[r], 1) << "rank " << r;
  }
}

TEST(DeviceErrors, HostPointersAreRefusedOnEveryRank) {
  hb_embedding_config c = config(HB_OPT_ADAGRAD, 20, HB_PARTITION_DIV);
  c.device = 0;
  auto res = on_three(c, [&](int r, DevRig &g) {
    std::vector<int64_t> ids = {1, 2, 3};
    std::vector<float> grads(3 * c.dim, 0.5f);
    DevBuf d_ids(*g.ops, 24), d_grads(*g.ops, grads.size() * 4);
    const int64_t *p = r == 0 ? ids.data() : d_ids.put(ids);
    g.dt->apply_gradients(p, 3, d_grads.put(grads));
  });
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(res[r].first, HB_ERR_INVALID_ARGUMENT) << res[r].second;
  EXPECT_NE(res[0].second.find("ids is host memory"), std::string::npos)
      << res[0].second;
  EXPECT_NE(res[2].second.find("rank 0"), std::string::npos) << res[2].second;
}

// Host ops whose device id map has no room for rows (as a map sized
// wrongly would be): the assign reports -1 in the count.
struct RoomlessOps : HostDeviceOps {
  using HostDeviceOps::HostDeviceOps;
  void idmap_assign(int64_t *keys, int64_t *vals, int64_t capacity,
                    const int64_t *ids, size_t n, const int64_t *num_ids,
                    int64_t *row_ids, int64_t, int64_t *num_rows,
                    int64_t *first_new, int64_t *out_rows) override {
    HostDeviceOps::idmap_assign(keys, vals, capacity, ids, n, num_ids, row_ids,
                                0, num_rows, first_new, out_rows);
  }
};

TEST(DeviceErrors, LostDeviceMapFailsEveryRankFromThenOn) {
  hb_embedding_config c = config(HB_OPT_SGD, 0, HB_PARTITION_MOD);
  c.device = 0;
  const hb::emb::Spec spec = hb::emb::spec_from_config(&c);
  ThreadWorld hw(3), dw(3);
  std::vector<std::vector<hb_status>> st(3);
  std::string msg;
  ThreadWorld::run(3, [&](int r) {
    hb::emb::Table host(spec, hw.endpoint(r));
    HostDeviceOps *ops = nullptr;
    hb::emb::DeviceTable dt(host, [&]() -> std::unique_ptr<hb::emb::DeviceOps> {
      auto o = r == 1 ? std::make_unique<RoomlessOps>(dw.endpoint(r))
                      : std::make_unique<HostDeviceOps>(dw.endpoint(r));
      ops = o.get();
      return o;
    });
    const std::vector<int64_t> ids = {1, 4, 7};  // rank 1 owns them
    DevBuf d_ids(*ops, 24), out(*ops, 3 * c.dim * 4);
    for (int step = 0; step < 3; ++step) {
      hb_status s = HB_OK;
      try {
        dt.lookup(d_ids.put(ids), 3, static_cast<float *>(out.p));
      } catch (const hb::Error &e) {
        s = e.status();
        if (r == 1) msg = e.what();
      }
      st[r].push_back(s);
    }
  });
  // The step that lost the rows cannot tell; the next ones fail everywhere.
  const std::vector<hb_status> want = {HB_OK, HB_ERR_INTERNAL, HB_ERR_INTERNAL};
  for (int r = 0; r < 3; ++r) EXPECT_EQ(st[r], want) << "rank " << r;
  EXPECT_NE(msg.find("device id map ran out of room"), std::string::npos)
      << msg;
}

TEST(DeviceErrors, FailedDeviceSetupFailsCreationOnEveryRank) {
  hb_embedding_config c = config(HB_OPT_SGD, 20, HB_PARTITION_MOD);
  c.device = 0;
  // One rank cannot set up its device: every rank's creation fails.
  hb::emb::Spec spec = hb::emb::spec_from_config(&c);
  ThreadWorld hw(3), dw(3);
  std::vector<hb_status> st(3, HB_OK);
  ThreadWorld::run(3, [&](int r) {
    hb::emb::Table host(spec, hw.endpoint(r));
    try {
      hb::emb::DeviceTable dt(
          host, [&]() -> std::unique_ptr<hb::emb::DeviceOps> {
            if (r == 2)
              hb::fail(HB_ERR_UNSUPPORTED, "no CUDA device on rank 2");
            return std::make_unique<HostDeviceOps>(dw.endpoint(r));
          });
    } catch (const hb::Error &e) {
      st[r] = e.status();
    }
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(st[r], HB_ERR_UNSUPPORTED) << r;
}

}  // namespace
