// Multi-rank NCCL collectives through the public API, run by hbrun:
//   gpu_mp_collectives            every collective, dtype and op against a
//                                 host reference built from all ranks' data;
//   gpu_mp_collectives peer_loss  the last rank vanishes mid-collective and
//                                 the others must get HB_ERR_PEER_FAILED (or
//                                 HB_ERR_DEVICE from NCCL), not hang.
// Needs one distinct GPU per rank (NCCL refuses two ranks on one device):
// otherwise every rank prints why and exits 0 (skipped).
#include <cuda_runtime.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_test_data.h"
#include "hb.h"

namespace {

int g_failures = 0;
int g_rank = 0;

#define CHECK_HB(call)                                                    \
  do {                                                                    \
    hb_status st_ = (call);                                               \
    if (st_ != HB_OK) {                                                   \
      std::fprintf(stderr, "rank %d: %s failed: %s: %s\n", g_rank, #call, \
                   hb_status_name(st_), hb_last_error());                 \
      std::exit(1);                                                       \
    }                                                                     \
  } while (0)

#define CHECK_CUDA(call)                                       \
  do {                                                         \
    cudaError_t e_ = (call);                                   \
    if (e_ != cudaSuccess) {                                   \
      std::fprintf(stderr, "rank %d: %s: %s\n", g_rank, #call, \
                   cudaGetErrorString(e_));                    \
      std::exit(1);                                            \
    }                                                          \
  } while (0)

struct Device {
  explicit Device(size_t bytes) {
    CHECK_CUDA(cudaMalloc(&p, bytes ? bytes : 1));
  }
  ~Device() { cudaFree(p); }
  void *p = nullptr;
};

void *upload(Device &d, const std::vector<uint8_t> &h) {
  CHECK_CUDA(cudaMemcpy(d.p, h.data(), h.size(), cudaMemcpyHostToDevice));
  return d.p;
}

std::vector<uint8_t> download(hb_context *ctx, const Device &d, size_t bytes) {
  CHECK_HB(hb_context_synchronize(ctx));  // hb's stream is non-blocking
  std::vector<uint8_t> h(bytes);
  CHECK_CUDA(cudaMemcpy(h.data(), d.p, bytes, cudaMemcpyDeviceToHost));
  return h;
}

void expect(bool ok, const std::string &what) {
  if (ok) return;
  if (++g_failures < 20)
    std::fprintf(stderr, "rank %d: FAIL %s\n", g_rank, what.c_str());
}

// Data of rank r (the same on every rank that builds it).
std::vector<uint8_t> data_of(hb_dtype dt, size_t n, int r, uint32_t salt) {
  return hb_test::small_ints(dt, n, 1000u * static_cast<uint32_t>(r) + salt);
}

// exact: bit-equal results expected. Otherwise (float averages, float
// products of more than two ranks, which round in NCCL's order) a relative
// tolerance; float16 products past 65504 overflow to inf on the device.
bool close(double got, double want, bool exact) {
  if (exact) return got == want;
  if (std::isinf(got) && std::fabs(want) >= 65504.0) return got * want > 0;
  return std::fabs(got - want) <= 1e-2 * (1 + std::fabs(want));
}

void test_reductions(hb_context *ctx, int world) {
  const size_t n = 4099;  // not a multiple of anything NCCL likes
  for (hb_dtype dt : hb_test::kAllDtypes) {
    size_t es = hb_dtype_size(dt);
    for (hb_reduce_op op : {HB_SUM, HB_PROD, HB_MIN, HB_MAX, HB_AVG}) {
      bool exact = dt == HB_INT32 || dt == HB_INT64 || dt == HB_UINT8 ||
                   (op != HB_AVG && (op != HB_PROD || world == 2));
      std::vector<std::vector<uint8_t>> all;
      for (int r = 0; r < world; ++r)
        all.push_back(data_of(dt, n * world, r, 11 + op));
      Device send(n * world * es), recv(n * world * es);
      upload(send, all[g_rank]);
      CHECK_HB(hb_allreduce(ctx, send.p, recv.p, n * world, dt, op));
      auto got = download(ctx, recv, n * world * es);
      for (size_t i = 0; i < n * world; ++i)
        expect(close(hb_test::element(got, dt, i),
                     hb_test::reduce_ref(all, dt, op, i), exact),
               "allreduce " + std::string(hb::dtype_name(dt)) + " op " +
                   std::to_string(op) + " element " + std::to_string(i));
      CHECK_HB(hb_reduce_scatter(ctx, send.p, recv.p, n, dt, op));
      got = download(ctx, recv, n * es);
      for (size_t i = 0; i < n; ++i)
        expect(close(hb_test::element(got, dt, i),
                     hb_test::reduce_ref(all, dt, op, g_rank * n + i), exact),
               "reduce_scatter " + std::string(hb::dtype_name(dt)) + " op " +
                   std::to_string(op) + " element " + std::to_string(i));
    }
  }
}

void test_data_movement(hb_context *ctx, int world) {
  for (hb_dtype dt : hb_test::kAllDtypes) {
    size_t es = hb_dtype_size(dt), n = 1031;
    std::string name = hb::dtype_name(dt);
    std::vector<std::vector<uint8_t>> all;
    for (int r = 0; r < world; ++r)
      all.push_back(data_of(dt, n * world, r, 77));
    Device send(n * world * es), recv(n * world * es + 64 * es);
    upload(send, all[g_rank]);
    // allgather: rank r's first n elements at r * n.
    CHECK_HB(hb_allgather(ctx, send.p, recv.p, n, dt));
    auto got = download(ctx, recv, n * world * es);
    for (int r = 0; r < world; ++r)
      expect(!std::memcmp(&got[r * n * es], all[r].data(), n * es),
             "allgather " + name);
    // alltoall: block r of rank p's send lands at p * n on rank r.
    CHECK_HB(hb_alltoall(ctx, send.p, recv.p, n, dt));
    got = download(ctx, recv, n * world * es);
    for (int p = 0; p < world; ++p)
      expect(!std::memcmp(&got[p * n * es], &all[p][g_rank * n * es], n * es),
             "alltoall " + name);
    // broadcast from the last rank.
    CHECK_HB(hb_broadcast(ctx, send.p, recv.p, n, dt, world - 1));
    got = download(ctx, recv, n * es);
    expect(!std::memcmp(got.data(), all[world - 1].data(), n * es),
           "broadcast " + name);
    // allgatherv: rank r sends r + 3 elements; blocks land with a gap of 2.
    std::vector<int64_t> counts(world), offsets(world);
    for (int r = 0; r < world; ++r) {
      counts[r] = r + 3;
      offsets[r] = r == 0 ? 1 : offsets[r - 1] + counts[r - 1] + 2;
    }
    CHECK_HB(hb_allgatherv(ctx, send.p, counts[g_rank], recv.p, counts.data(),
                           offsets.data(), dt));
    got = download(ctx, recv, (offsets[world - 1] + counts[world - 1]) * es);
    for (int r = 0; r < world; ++r)
      expect(!std::memcmp(&got[offsets[r] * es], all[r].data(), counts[r] * es),
             "allgatherv " + name);
    // alltoallv: rank p sends p + q + 1 elements to rank q, from offset
    // 5 * q of its send buffer; they land packed in rank order.
    std::vector<int64_t> sc(world), so(world), rc(world), ro(world);
    for (int q = 0; q < world; ++q) {
      sc[q] = g_rank + q + 1;
      so[q] = 5 * q;
      rc[q] = q + g_rank + 1;
      ro[q] = q == 0 ? 0 : ro[q - 1] + rc[q - 1];
    }
    CHECK_HB(hb_alltoallv(ctx, send.p, sc.data(), so.data(), recv.p, rc.data(),
                          nullptr, dt));
    got = download(ctx, recv, (ro[world - 1] + rc[world - 1]) * es);
    for (int p = 0; p < world; ++p)
      expect(
          !std::memcmp(&got[ro[p] * es], &all[p][5 * g_rank * es], rc[p] * es),
          "alltoallv " + name + " from rank " + std::to_string(p));
  }
}

// The last rank leaves without a word while the others wait on a
// collective it will never join.
int peer_loss(hb_context *ctx, int world) {
  Device buf(1 << 20);
  CHECK_HB(hb_allreduce(ctx, buf.p, buf.p, 1 << 18, HB_FLOAT32, HB_SUM));
  CHECK_HB(hb_context_synchronize(ctx));  // the communicator works
  if (g_rank == world - 1) _exit(0);      // vanish: no goodbye, no NCCL call
  hb_status st = hb_allreduce(ctx, buf.p, buf.p, 1 << 18, HB_FLOAT32, HB_SUM);
  if (st == HB_OK) st = hb_context_synchronize(ctx);
  std::printf("rank %d: after the peer vanished: %s: %s\n", g_rank,
              hb_status_name(st), hb_last_error());
  // Usually the rendezvous notices first (HB_ERR_PEER_FAILED); over a
  // network transport NCCL may see the broken connection first
  // (HB_ERR_DEVICE). Either way the call returned instead of hanging.
  bool ok = st == HB_ERR_PEER_FAILED || st == HB_ERR_ABORTED ||
            st == HB_ERR_DEVICE;
  hb_context_destroy(ctx);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv) {
  bool loss = argc > 1 && std::string(argv[1]) == "peer_loss";
  hb_context_options opts = HB_CONTEXT_OPTIONS_INIT;
  opts.options =
      loss ? "timeout_ms=60000,peer_timeout_ms=2000" : "timeout_ms=120000";
  hb_context *ctx = nullptr;
  CHECK_HB(hb_context_create(&opts, &ctx));
  g_rank = hb_context_rank(ctx);
  int world = hb_context_world_size(ctx);
  // One PCI bus id per rank, gathered over the CPU backend: every rank
  // takes the same decision to run or skip.
  char bus[64] = "none";
  std::string dev = hb_context_device(ctx);
  if (dev.rfind("cuda:", 0) == 0 &&
      cudaDeviceGetPCIBusId(bus, sizeof bus, std::atoi(dev.c_str() + 5)) !=
          cudaSuccess)
    std::snprintf(bus, sizeof bus, "none");
  std::vector<char> buses(64 * world);
  CHECK_HB(hb_allgather(ctx, bus, buses.data(), 64, HB_UINT8));
  std::string why;
  for (int r = 0; r < world && why.empty(); ++r) {
    if (!std::strcmp(&buses[64 * r], "none"))
      why = "rank " + std::to_string(r) + " has no GPU";
    for (int q = 0; q < r && why.empty(); ++q)
      if (!std::strcmp(&buses[64 * r], &buses[64 * q]))
        why = "ranks " + std::to_string(q) + " and " + std::to_string(r) +
              " share GPU " + &buses[64 * r] + " (NCCL needs one GPU per rank)";
  }
  if (!why.empty()) {
    if (g_rank == 0)
      std::printf("SKIP gpu_mp_collectives: %s; %s\n", why.c_str(),
                  hb_build_info());
    hb_context_destroy(ctx);
    return 0;
  }
  if (loss) return peer_loss(ctx, world);
  test_reductions(ctx, world);
  test_data_movement(ctx, world);
  // Every rank learns whether any failed (host allreduce).
  int32_t failures = g_failures, total = 0;
  CHECK_HB(hb_allreduce(ctx, &failures, &total, 1, HB_INT32, HB_SUM));
  if (g_rank == 0)
    std::printf("gpu_mp_collectives: %d ranks, %d failures\n", world, total);
  hb_context_destroy(ctx);
  return total == 0 ? 0 : 1;
}
