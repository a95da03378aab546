// The GPU table's device-side plan (DevicePlan over the host implementation
// of the plugin's kernels) against the host StepPlan, entry for entry:
// send counts, send ids (distinct ids in first-occurrence order, stable by
// owner), the send slot of every position, the groupings of the segment
// sums, the owner's dedup, dense rows and the first bad id -- random ids
// with duplicates, empty batches, MOD / DIV / dynamic tables, worlds 1-7.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "abi/error.h"
#include "embedding/device_plan.h"
#include "embedding/plan.h"
#include "host_device_ops.h"

using hbtest::HostDeviceOps;

namespace {

hb::emb::Spec spec_of(int kind) {
  hb_embedding_config c = HB_EMBEDDING_CONFIG_INIT;
  c.name = "plan";
  c.dim = 4;
  c.num_rows = kind == 2 ? 0 : 1000;
  c.partition = kind == 1 ? HB_PARTITION_DIV : HB_PARTITION_MOD;
  return hb::emb::spec_from_config(&c);
}

template <class T>
std::vector<T> download(HostDeviceOps &ops, const T *p, size_t n) {
  std::vector<T> v(n);
  ops.sync();
  if (n) ops.copy(v.data(), p, n * sizeof(T));
  ops.sync();
  return v;
}

std::vector<int64_t> to_i64(const std::vector<uint32_t> &v) {
  return std::vector<int64_t>(v.begin(), v.end());
}

// A caller's device buffer of ids.
struct DeviceIds {
  HostDeviceOps &ops;
  int64_t *p;
  DeviceIds(HostDeviceOps &o, const std::vector<int64_t> &ids)
      : ops(o),
        p(static_cast<int64_t *>(
            o.alloc(std::max<size_t>(ids.size(), 1) * 8))) {
    if (!ids.empty()) o.copy(p, ids.data(), ids.size() * 8);
  }
  ~DeviceIds() {
    ops.sync();
    ops.free(p);
  }
};

// Ids of one batch: n draws from a range small enough for duplicates;
// dynamic tables get any int64 (negative, huge) too.
std::vector<int64_t> batch(std::mt19937_64 &rng, size_t n, int kind) {
  std::vector<int64_t> ids(n);
  const uint64_t range = 1 + rng() % 1000;
  for (auto &id : ids) {
    id = static_cast<int64_t>(rng() % range);
    if (kind == 2 && rng() % 7 == 0)
      id = rng() % 2 ? -id - 1 : static_cast<int64_t>(rng());
  }
  return ids;
}

void compare_plans(int kind, int world, const std::vector<int64_t> &ids,
                   const std::string &where) {
  SCOPED_TRACE(where);
  const hb::emb::Spec spec = spec_of(kind);
  const size_t n = ids.size();
  hb::emb::StepPlan host(spec, 0, world);
  host.prepare(ids.data(), n, n ? &host : nullptr, "hb_embedding_lookup");

  HostDeviceOps ops(nullptr);
  hb::emb::DevicePlan dev(spec, world);
  {
    DeviceIds d(ops, ids);
    ASSERT_EQ(dev.plan(ops, n ? d.p : nullptr, n), -1);
    const std::vector<int64_t> counts(dev.send_counts(),
                                      dev.send_counts() + world);
    EXPECT_EQ(counts, host.send_counts());
    ASSERT_EQ(dev.send_total(), host.send_ids().size());
    const size_t nsend = dev.send_total();
    EXPECT_EQ(download(ops, dev.send_ids(), nsend), host.send_ids());
    // slots[i] = pos[inverse[i]]: where the row of ids[i] comes back.
    std::vector<int64_t> want_slots(n);
    for (size_t i = 0; i < n; ++i)
      want_slots[i] = host.pos()[host.local().inverse()[i]];
    EXPECT_EQ(download(ops, dev.slots(), n), want_slots);

    // The local sums' grouping: positions by slot, ascending.
    dev.group_by_slot(ops);
    std::vector<int64_t> order, seg;
    hb::emb::group_by_slot(host.local().inverse().data(), n, host.pos().data(),
                           nsend, &order, &seg);
    const hb::emb::DeviceGrouping &g = dev.slot_groups();
    EXPECT_EQ(download(ops, g.count.get<int64_t>(), 1)[0],
              static_cast<int64_t>(nsend));
    EXPECT_EQ(download(ops, g.order.get<int64_t>(), n), order);
    EXPECT_EQ(download(ops, g.seg.get<int64_t>(), nsend + 1), seg);

    // The owner's dedup and grouping, with the batch as what it received.
    dev.owner_dedup(ops, n ? d.p : nullptr, n);
    hb::emb::Dedup want;
    want.run(ids.data(), n);
    const size_t nu = want.unique().size();
    const hb::emb::DeviceDedup &u = dev.owner();
    ASSERT_EQ(download(ops, u.count.get<int64_t>(), 1)[0],
              static_cast<int64_t>(nu));
    EXPECT_EQ(download(ops, u.unique.get<int64_t>(), nu), want.unique());
    EXPECT_EQ(download(ops, u.inverse.get<int64_t>(), n),
              to_i64(want.inverse()));
    hb::emb::group_by_slot(want.inverse().data(), n, nullptr, nu, &order, &seg);
    const hb::emb::DeviceGrouping &og = dev.owner_groups();
    EXPECT_EQ(download(ops, og.order.get<int64_t>(), n), order);
    EXPECT_EQ(download(ops, og.seg.get<int64_t>(), nu + 1), seg);

    // Static tables: the owner's dense rows of the unique ids, bounded by
    // the device count (rows past it untouched).
    if (kind != 2 && nu) {
      hb::emb::Partitioner part(spec, world);
      int64_t *rows = static_cast<int64_t *>(ops.alloc((n + 1) * 8));
      std::vector<int64_t> sentinel(n + 1, -5);
      ops.copy(rows, sentinel.data(), sentinel.size() * 8);
      dev.local_rows(ops, u.unique.get<int64_t>(), n, u.count.get<int64_t>(),
                     rows);
      std::vector<int64_t> got = download(ops, rows, n + 1), want_rows;
      for (int64_t id : want.unique())
        want_rows.push_back(part.local_index(id));
      want_rows.resize(n + 1, -5);
      EXPECT_EQ(got, want_rows);
      ops.free(rows);
    }
  }
  dev.release(ops);
}

class DevicePlanMatchesHost
    : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(DevicePlanMatchesHost, RandomBatches) {
  const int kind = std::get<0>(GetParam()), world = std::get<1>(GetParam());
  std::mt19937_64 rng(100 * kind + world);
  for (size_t n :
       {size_t(0), size_t(1), size_t(2), size_t(17), size_t(300), size_t(2000)})
    for (int rep = 0; rep < 3; ++rep)
      compare_plans(kind, world, batch(rng, n, kind),
                    "n " + std::to_string(n) + " rep " + std::to_string(rep));
  // All equal, all distinct, descending.
  compare_plans(kind, world, std::vector<int64_t>(50, 7), "all equal");
  std::vector<int64_t> desc(64);
  for (size_t i = 0; i < desc.size(); ++i)
    desc[i] = static_cast<int64_t>(999 - 3 * i);
  compare_plans(kind, world, desc, "distinct descending");
}

std::string case_name(
    const ::testing::TestParamInfo<std::tuple<int, int>> &info) {
  const char *kinds[] = {"mod", "div", "dynamic"};
  return std::string(kinds[std::get<0>(info.param)]) + "_w" +
         std::to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(All, DevicePlanMatchesHost,
                         ::testing::Combine(::testing::Values(0, 1, 2),
                                            ::testing::Values(1, 2, 3, 4, 7)),
                         case_name);

// A static table's plan finds the first out-of-range id in batch order --
// the id the host plan rejects.
TEST(DevicePlanBadIds, FirstBadPositionIsTheHostPlansBadId) {
  std::mt19937_64 rng(5);
  for (int kind : {0, 1})
    for (int rep = 0; rep < 20; ++rep) {
      const hb::emb::Spec spec = spec_of(kind);
      std::vector<int64_t> ids = batch(rng, 1 + rng() % 200, kind);
      const size_t bad = rng() % ids.size();
      ids[bad] =
          rng() % 2 ? -1 - int64_t(rng() % 9) : 1000 + int64_t(rng() % 9);
      if (rng() % 2 && bad + 1 < ids.size()) ids.back() = -3;  // a later one
      hb::emb::StepPlan host(spec, 0, 3);
      int64_t rejected = 0;
      try {
        host.prepare(ids.data(), ids.size(), &host, "hb_embedding_lookup");
        FAIL() << "the host plan accepted a bad id";
      } catch (const hb::Error &e) {
        ASSERT_TRUE(host.bad_id().has_value()) << e.what();
        rejected = *host.bad_id();
      }
      HostDeviceOps ops(nullptr);
      hb::emb::DevicePlan dev(spec, 3);
      {
        DeviceIds d(ops, ids);
        const int64_t at = dev.plan(ops, d.p, ids.size());
        ASSERT_EQ(at, static_cast<int64_t>(bad));
        EXPECT_EQ(ids[static_cast<size_t>(at)], rejected);
      }
      dev.release(ops);
    }
}

}  // namespace
