// NCCL collectives through ContextState at world size 1 against a host
// reference, for every collective, dtype and op; plus the failure paths
// (abort through Health, bad arguments) that must never hang.
#include <gtest/gtest.h>

#include <numeric>

#include "abi/error.h"
#include "common/health.h"
#include "gpu/context_state.h"
#include "gpu_test_util.h"

namespace {

using hb::gpu::CollectiveCall;
using hb_test::DeviceBuffer;

constexpr int64_t kTimeoutMs = 60000;

class GpuCollectives : public ::testing::Test {
 protected:
  void SetUp() override {
    HB_REQUIRE_GPU();
    state_.reset(
        new hb::gpu::ContextState(hb::gpu::require_plugin(), 0, &health_));
  }
  // Runs call (send/recv given as host bytes) on the GPU; returns recv.
  std::vector<uint8_t> run(CollectiveCall call,
                           const std::vector<uint8_t> &send, size_t recv_bytes,
                           bool in_place = false) {
    void *s = state_->stream();
    DeviceBuffer dsend(send, s);
    std::vector<uint8_t> init(recv_bytes, 0xAB);  // untouched bytes must stay
    DeviceBuffer drecv(init, s);
    call.send = in_place ? drecv.get() : dsend.get();
    if (in_place) drecv.upload(send.data(), send.size(), s);
    call.recv = drecv.get();
    state_->collective(call, hb::gpu::Peers{}, kTimeoutMs);
    std::vector<uint8_t> out(recv_bytes);
    drecv.download(out.data(), recv_bytes, s);
    state_->synchronize(kTimeoutMs);
    return out;
  }
  hb::Health health_;
  std::unique_ptr<hb::gpu::ContextState> state_;
};

TEST_F(GpuCollectives, AllreduceEveryDtypeAndOp) {
  for (hb_dtype dt : hb_test::kAllDtypes) {
    for (hb_reduce_op op : {HB_SUM, HB_PROD, HB_MIN, HB_MAX, HB_AVG}) {
      for (bool in_place : {false, true}) {
        size_t n = 1000, es = hb_dtype_size(dt);
        auto send = hb_test::small_ints(dt, n, 7 + dt);
        CollectiveCall c{CollectiveCall::kAllreduce};
        c.count = n;
        c.dtype = dt;
        c.op = op;
        // One rank: every reduction is the identity (avg divides by 1).
        EXPECT_EQ(run(c, send, n * es, in_place), send)
            << hb::dtype_name(dt) << " op " << op << " in_place " << in_place;
      }
    }
  }
}

TEST_F(GpuCollectives, GatherScatterBroadcastEveryDtype) {
  for (hb_dtype dt : hb_test::kAllDtypes) {
    size_t n = 333, es = hb_dtype_size(dt);
    auto send = hb_test::small_ints(dt, n, 100 + dt);
    for (auto kind :
         {CollectiveCall::kAllgather, CollectiveCall::kAlltoall,
          CollectiveCall::kBroadcast, CollectiveCall::kReduceScatter}) {
      CollectiveCall c{kind};
      c.count = n;
      c.dtype = dt;
      EXPECT_EQ(run(c, send, n * es), send)
          << hb::dtype_name(dt) << " kind " << kind;
    }
    // v-variants with a non-packed offset: the block lands at element 5,
    // the bytes around it keep their value.
    int64_t counts[1] = {static_cast<int64_t>(n)}, offsets[1] = {5};
    std::vector<uint8_t> expect((n + 9) * es, 0xAB);
    std::copy(send.begin(), send.end(), expect.begin() + 5 * es);
    CollectiveCall gv{CollectiveCall::kAllgatherv};
    gv.count = n;
    gv.dtype = dt;
    gv.recv_counts = counts;
    gv.recv_offsets = offsets;
    EXPECT_EQ(run(gv, send, expect.size()), expect)
        << hb::dtype_name(dt) << " allgatherv";
    CollectiveCall av{CollectiveCall::kAlltoallv};
    av.dtype = dt;
    av.send_counts = counts;
    av.recv_counts = counts;
    av.recv_offsets = offsets;
    EXPECT_EQ(run(av, send, expect.size()), expect)
        << hb::dtype_name(dt) << " alltoallv";
  }
}

TEST_F(GpuCollectives, ZeroCountsAndUserStream) {
  CollectiveCall c{CollectiveCall::kAllreduce};
  c.count = 0;
  EXPECT_EQ(run(c, {}, 4), std::vector<uint8_t>(4, 0xAB));
  // A stream of the caller's own: hb enqueues there; NULL restores its own.
  const hb_cuda_plugin &p = hb::gpu::require_plugin();
  void *user = nullptr;
  hb::gpu::plugin_call("stream", p.stream_create, &user);
  void *own = state_->stream();
  state_->set_stream(user, kTimeoutMs);
  EXPECT_EQ(state_->stream(), user);
  auto send = hb_test::small_ints(HB_FLOAT32, 64, 1);
  c.count = 64;
  EXPECT_EQ(run(c, send, send.size()), send);
  state_->set_stream(nullptr, kTimeoutMs);
  EXPECT_EQ(state_->stream(), own);
  hb::gpu::plugin_call("stream", p.stream_destroy, user);
}

TEST_F(GpuCollectives, HealthFailureAbortsInsteadOfHanging) {
  auto send = hb_test::small_ints(HB_FLOAT32, 16, 1);
  CollectiveCall c{CollectiveCall::kAllreduce};
  c.count = 16;
  EXPECT_EQ(run(c, send, send.size()), send);  // communicator exists now
  health_.fail(HB_ERR_PEER_FAILED, "rank 1 lost (test)");
  EXPECT_TRUE(state_->comm_aborted());  // the subscription aborted NCCL at once
  DeviceBuffer buf(64);
  c.send = c.recv = buf.get();
  hb_status st =
      hb::guard([&] { state_->collective(c, hb::gpu::Peers{}, kTimeoutMs); });
  EXPECT_EQ(st, HB_ERR_PEER_FAILED);
  EXPECT_NE(std::string(hb_last_error()).find("rank 1 lost"),
            std::string::npos);
  EXPECT_EQ(hb::guard([&] { state_->synchronize(kTimeoutMs); }),
            HB_ERR_PEER_FAILED);
}

TEST_F(GpuCollectives, AbortedContext) {
  health_.fail(HB_ERR_ABORTED, "user abort");
  DeviceBuffer buf(64);
  CollectiveCall c{CollectiveCall::kBroadcast};
  c.send = c.recv = buf.get();
  c.count = 16;
  EXPECT_EQ(
      hb::guard([&] { state_->collective(c, hb::gpu::Peers{}, kTimeoutMs); }),
      HB_ERR_ABORTED);
}

}  // namespace
