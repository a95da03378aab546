// One rank of the multi-process collective tests, through the public ABI.
//
//   mp_collectives sweep            every collective x dtype (x op) against a
//                                   local reference, fusion equivalence and
//                                   argument errors (run by hbrun, 2-4 ranks)
//   mp_collectives kill allreduce   the last rank SIGKILLs itself during a
//   mp_collectives kill alltoallv   long collective loop; every other rank
//                                   must get HB_ERR_PEER_FAILED naming it
//                                   within the liveness bound, then destroy
//                                   its context (started by mp_kill_test)
//   mp_collectives kill allreduce_small   the same with 4 KiB calls (the
//                                   shared-memory call board)
//   mp_collectives abort            rank 1 calls hb_context_abort from a
//                                   second thread while every rank is in an
//                                   allreduce loop: all get HB_ERR_ABORTED
//                                   with the reason, promptly
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/mp_check.h"
#include "context/context.h"
#include "hb.h"
#include "typed.h"

int g_mp_rank = -1;
const char *g_mp_name = "mp_collectives";

namespace {

using Bytes = std::vector<unsigned char>;
using hb::test::get;
using hb::test::put;
using hb::test::through;

int g_world = 0;

#define CHECK_INVALID(call, text)                                             \
  do {                                                                        \
    hb_status st_ = (call);                                                   \
    CHECK(                                                                    \
        st_ == HB_ERR_INVALID_ARGUMENT && std::strstr(hb_last_error(), text), \
        "%s: %s: '%s' lacks '%s'", #call, hb_status_name(st_),                \
        hb_last_error(), text);                                               \
  } while (0)

Bytes make(hb_dtype t, size_t n) {
  return Bytes(std::max<size_t>(n, 1) * hb_dtype_size(t));
}

void sweep_allreduce(hb_context *ctx) {
  const size_t count = 1031;
  for (hb_dtype t : hb::test::kAllDtypes)
    for (hb_reduce_op op : hb::test::kAllOps) {
      Bytes send = make(t, count), recv = make(t, count);
      for (size_t i = 0; i < count; ++i)
        put(t, send.data(), i, hb::test::input(g_mp_rank, i, op, t));
      CHECK_OK(hb_allreduce(ctx, send.data(), recv.data(), count, t, op));
      CHECK_OK(hb_allreduce(ctx, send.data(), send.data(), count, t,
                            op));  // in place
      for (size_t i = 0; i < count; ++i) {
        std::vector<double> x(g_world);
        for (int q = 0; q < g_world; ++q) x[q] = hb::test::input(q, i, op, t);
        double want = through(t, hb::test::reference(x, op, t));
        CHECK(get(t, recv.data(), i) == want && get(t, send.data(), i) == want,
              "allreduce %s op %d [%zu]: %g / %g, want %g", hb::dtype_name(t),
              op, i, get(t, recv.data(), i), get(t, send.data(), i), want);
      }
      // reduce_scatter of the same values, 33 per rank.
      const size_t rc = 33;
      Bytes rs = make(t, rc * g_world), out = make(t, rc);
      for (size_t i = 0; i < rc * g_world; ++i)
        put(t, rs.data(), i, hb::test::input(g_mp_rank, i, op, t));
      CHECK_OK(hb_reduce_scatter(ctx, rs.data(), out.data(), rc, t, op));
      for (size_t i = 0; i < rc; ++i) {
        std::vector<double> x(g_world);
        for (int q = 0; q < g_world; ++q)
          x[q] = hb::test::input(q, g_mp_rank * rc + i, op, t);
        CHECK(
            get(t, out.data(), i) == through(t, hb::test::reference(x, op, t)),
            "reduce_scatter %s op %d [%zu]", hb::dtype_name(t), op, i);
      }
    }
}

double tag(int from, int to, size_t i) {
  return double((from * 7 + to * 3 + i) % 101);
}

void sweep_data_movement(hb_context *ctx) {
  const int n = g_world, me = g_mp_rank;
  for (hb_dtype t : hb::test::kAllDtypes) {
    // allgather
    const size_t c = 129;
    Bytes s = make(t, c), r = make(t, c * n);
    for (size_t i = 0; i < c; ++i) put(t, s.data(), i, tag(me, 0, i));
    CHECK_OK(hb_allgather(ctx, s.data(), r.data(), c, t));
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < c; ++i)
        CHECK(get(t, r.data(), q * c + i) == through(t, tag(q, 0, i)),
              "allgather %s", hb::dtype_name(t));
    // allgatherv: uneven, the last rank sends nothing, NULL offsets
    std::vector<int64_t> counts(n);
    int64_t total = 0;
    for (int q = 0; q < n; ++q) total += counts[q] = q == n - 1 ? 0 : 5 + 3 * q;
    Bytes gs = make(t, counts[me]), gr = make(t, total);
    for (int64_t i = 0; i < counts[me]; ++i)
      put(t, gs.data(), i, tag(me, 1, i));
    CHECK_OK(hb_allgatherv(ctx, gs.data(), counts[me], gr.data(), counts.data(),
                           nullptr, t));
    int64_t at = 0;
    for (int q = 0; q < n; ++q)
      for (int64_t i = 0; i < counts[q]; ++i, ++at)
        CHECK(get(t, gr.data(), at) == through(t, tag(q, 1, i)),
              "allgatherv %s", hb::dtype_name(t));
    // alltoall
    Bytes as = make(t, c * n), ar = make(t, c * n);
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < c; ++i)
        put(t, as.data(), p * c + i, tag(me, p, i));
    CHECK_OK(hb_alltoall(ctx, as.data(), ar.data(), c, t));
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < c; ++i)
        CHECK(get(t, ar.data(), p * c + i) == through(t, tag(p, me, i)),
              "alltoall %s", hb::dtype_name(t));
    // alltoallv: uneven counts including zeros, receive blocks in reverse order
    auto cnt = [](int from, int to) -> int64_t {
      return (from + 2 * to) % 3 == 0 ? 0 : 4 * from + to + 1;
    };
    std::vector<int64_t> sc(n), so(n), rcn(n), ro(n);
    int64_t sat = 0, rat = 0;
    for (int p = 0; p < n; ++p) {
      sc[p] = cnt(me, p);
      so[p] = sat;
      sat += sc[p];
    }
    for (int p = n - 1; p >= 0; --p) {
      rcn[p] = cnt(p, me);
      ro[p] = rat;
      rat += rcn[p] + 1;  // a gap after each block
    }
    Bytes vs = make(t, sat), vr = make(t, rat);
    for (int p = 0; p < n; ++p)
      for (int64_t i = 0; i < sc[p]; ++i)
        put(t, vs.data(), so[p] + i, tag(me, p, i));
    CHECK_OK(hb_alltoallv(ctx, vs.data(), sc.data(), nullptr, vr.data(),
                          rcn.data(), ro.data(), t));
    for (int p = 0; p < n; ++p)
      for (int64_t i = 0; i < rcn[p]; ++i)
        CHECK(get(t, vr.data(), ro[p] + i) == through(t, tag(p, me, i)),
              "alltoallv %s from %d [%lld]", hb::dtype_name(t), p,
              (long long)i);
    // broadcast from the last rank, in place
    const int root = n - 1;
    Bytes b = make(t, c);
    for (size_t i = 0; i < c; ++i) put(t, b.data(), i, tag(me, 9, i));
    CHECK_OK(hb_broadcast(ctx, b.data(), b.data(), c, t, root));
    for (size_t i = 0; i < c; ++i)
      CHECK(get(t, b.data(), i) == through(t, tag(root, 9, i)), "broadcast %s",
            hb::dtype_name(t));
  }
}

void sweep_fusion(hb_context *ctx, const char *option, const char *value) {
  CHECK_OK(hb_context_set_option(ctx, option, value));
  std::mt19937 rng(1234 + g_mp_rank);
  std::uniform_real_distribution<float> val(-1, 1);
  const size_t n = 256;
  std::vector<std::vector<float>> fused(n), single(n);
  std::vector<void *> bufs(n);
  std::vector<size_t> counts(n);
  for (size_t k = 0; k < n; ++k) {
    counts[k] = (k * 37) % 300 + (k == 5 ? 0 : 1) * (k % 7);
    fused[k].resize(std::max<size_t>(counts[k], 1));
    for (auto &x : fused[k]) x = val(rng);
    single[k] = fused[k];
    bufs[k] = fused[k].data();
  }
  CHECK_OK(hb_allreduce_many(ctx, bufs.data(), counts.data(), n, HB_FLOAT32,
                             HB_SUM));
  for (size_t k = 0; k < n; ++k)
    CHECK_OK(hb_allreduce(ctx, single[k].data(), single[k].data(), counts[k],
                          HB_FLOAT32, HB_SUM));
  for (size_t k = 0; k < n; ++k)
    CHECK(std::memcmp(fused[k].data(), single[k].data(), counts[k] * 4) == 0,
          "allreduce_many (%s=%s) differs from hb_allreduce at tensor %zu",
          option, value, k);
}

void sweep_errors(hb_context *ctx) {
  float x[8] = {0};
  CHECK_INVALID(hb_allreduce(ctx, nullptr, x, 4, HB_FLOAT32, HB_SUM),
                "send is NULL but count is 4");
  CHECK_INVALID(hb_allreduce(ctx, x, x, 4, 99, HB_SUM), "unknown dtype 99");
  CHECK_INVALID(hb_allreduce(ctx, x, x, 4, HB_FLOAT32, 17),
                "unknown reduce op 17");
  CHECK_INVALID(hb_allreduce(ctx, x, x, SIZE_MAX / 2, HB_FLOAT32, HB_SUM),
                "overflow");
  CHECK_INVALID(hb_broadcast(ctx, x, x, 4, HB_FLOAT32, g_world), "root");
  std::vector<int64_t> counts(g_world, 1);
  CHECK_INVALID(hb_allgatherv(ctx, x, 2, x, counts.data(), nullptr, HB_FLOAT32),
                "recv_counts[");
  counts[0] = -1;
  CHECK_INVALID(hb_alltoallv(ctx, x, counts.data(), nullptr, x, counts.data(),
                             nullptr, HB_FLOAT32),
                "send_counts[0] = -1 is negative");
  CHECK_INVALID(hb_allreduce(nullptr, x, x, 1, HB_FLOAT32, HB_SUM),
                "context is NULL");
  // The context still works after argument errors.
  x[0] = 1;
  CHECK_OK(hb_allreduce(ctx, x, x, 1, HB_FLOAT32, HB_SUM));
  CHECK(x[0] == float(g_world), "allreduce after errors: %g", x[0]);
}

void kill_test(const std::string &what) {
  hb_context *ctx = nullptr;
  CHECK_OK(hb_context_create(nullptr, &ctx));
  const int victim = g_world - 1;
  // 4 MiB of float32 per call; "allreduce_small": 4 KiB, which goes over
  // the shared-memory call board.
  const size_t count = what == "allreduce_small" ? 1024 : 1 << 20;
  std::vector<float> a(count, 1.f), b(count);
  std::vector<int64_t> cnt(g_world, count / g_world), off(g_world);
  for (int p = 0; p < g_world; ++p) off[p] = p * (count / g_world);
  auto call = [&] {
    return what == "alltoallv"
               ? hb_alltoallv(ctx, a.data(), cnt.data(), off.data(), b.data(),
                              cnt.data(), off.data(), HB_FLOAT32)
               : hb_allreduce(ctx, a.data(), b.data(), count, HB_FLOAT32,
                              HB_SUM);
  };
  for (int i = 0; i < 3; ++i) CHECK_OK(call());
  if (g_mp_rank == victim) {
    // Die in the middle of the next calls of the others.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    raise(SIGKILL);
  }
  const int64_t bound = ctx->options.get_int("peer_timeout_ms") + 3000;
  hb_status st = HB_OK;
  int64_t took = 0;
  for (int i = 0; i < 100000 && st == HB_OK; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    st = call();
    took = std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now() - t0)
               .count();
  }
  CHECK(st == HB_ERR_PEER_FAILED, "%s after rank %d died: %s: %s", what.c_str(),
        victim, hb_status_name(st), hb_last_error());
  CHECK(
      std::strstr(hb_last_error(), ("rank " + std::to_string(victim)).c_str()),
      "message does not name rank %d: %s", victim, hb_last_error());
  CHECK(took < bound, "the failing call took %lld ms, bound %lld ms",
        (long long)took, (long long)bound);
  CHECK(call() == HB_ERR_PEER_FAILED, "a later call: %s", hb_last_error());
  auto t0 = std::chrono::steady_clock::now();
  hb_context_destroy(ctx);
  auto destroy_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - t0)
                        .count();
  CHECK(destroy_ms < 5000, "destroy took %lld ms", (long long)destroy_ms);
  std::fprintf(stderr,
               "[mp_collectives r%d] %s: rank %d failure seen after %lld ms in "
               "the call\n",
               g_mp_rank, what.c_str(), victim, (long long)took);
}

void abort_test() {
  hb_context *ctx = nullptr;
  CHECK_OK(hb_context_create(nullptr, &ctx));
  std::vector<float> a(1 << 20, 1.f);
  for (int i = 0; i < 3; ++i)
    CHECK_OK(
        hb_allreduce(ctx, a.data(), a.data(), a.size(), HB_FLOAT32, HB_MAX));
  std::thread aborter;
  if (g_mp_rank == 1)
    aborter = std::thread([ctx] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      hb_context_abort(ctx, "mp_collectives says stop");
    });
  hb_status st = HB_OK;
  int64_t took = 0;
  for (int i = 0; i < 1000000 && st == HB_OK; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    st = hb_allreduce(ctx, a.data(), a.data(), a.size(), HB_FLOAT32, HB_MAX);
    took = std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now() - t0)
               .count();
  }
  if (aborter.joinable()) aborter.join();
  CHECK(st == HB_ERR_ABORTED, "allreduce during abort: %s: %s",
        hb_status_name(st), hb_last_error());
  CHECK(std::strstr(hb_last_error(), "mp_collectives says stop"),
        "reason missing: %s", hb_last_error());
  // Generous for a loaded 2-core machine under ASan: Gloo's own timeout
  // (timeout_ms) is 300 s.
  CHECK(took < 10000, "the aborted call took %lld ms", (long long)took);
  hb_context_destroy(ctx);
  std::fprintf(stderr,
               "[mp_collectives r%d] abort seen after %lld ms in the call\n",
               g_mp_rank, (long long)took);
}

}  // namespace

int main(int argc, char **argv) {
  const char *r = std::getenv("HB_RANK");
  const char *w = std::getenv("HB_WORLD_SIZE");
  g_mp_rank = r ? std::atoi(r) : 0;
  g_world = w ? std::atoi(w) : 1;
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "sweep") {
    hb_context *ctx = nullptr;
    CHECK_OK(hb_context_create(nullptr, &ctx));
    CHECK(hb_context_world_size(ctx) == g_world, "world %d",
          hb_context_world_size(ctx));
    sweep_allreduce(ctx);
    sweep_data_movement(ctx);
    sweep_fusion(ctx, "grad_nbuckets", "3");
    sweep_fusion(ctx, "grad_bucket_bytes", "4096");
    sweep_errors(ctx);
    hb_context_destroy(ctx);
    return 0;
  }
  if (mode == "abort") {
    abort_test();
    return 0;
  }
  if (mode == "kill" && argc > 2) {
    kill_test(argv[2]);
    return 0;
  }
  std::fprintf(stderr,
               "usage: mp_collectives sweep | abort | kill "
               "allreduce|allreduce_small|alltoallv\n");
  return 2;
}
