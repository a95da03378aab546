// One rank of the asynchronous allreduce tests (hb_allreduce_start/_wait),
// through the public ABI, run by hbrun:
//
//   mp_async equal     several sizes, dtypes and ops, several requests in
//                      flight at once and blocking collectives between start
//                      and wait: every result bit-identical to hb_allreduce's
//                      and to a rank-order fold computed here; a context
//                      destroyed with a request in flight, waited afterwards
//   mismatch           ranks start different counts, then different dtypes:
//                      every rank's wait fails with HB_ERR_MISMATCH, and a
//                      matched call afterwards works
//   peer               the last rank _exit()s while the others' request is
//                      in flight: their wait fails with HB_ERR_PEER_FAILED
//                      well within the timeout
//   slice              cpu_wait_slice_us=150 (HB_CPU_WAIT_SLICE_US): a
//                      started allreduce's progress thread runs with that
//                      scheduler slice, the caller's thread has its own
//                      slice back after hb_allreduce_wait, the results are
//                      hb_allreduce's (skipped without custom slices)
//   auto               cpu_async_exchange=auto: a rank without 2 CPUs
//                      (sched_getaffinity, online CPUs / local ranks) runs
//                      the start inline (it waits for a late peer), else
//                      on the thread (it returns at once), as does =1; the
//                      result is hb_allreduce's
// The other modes run with HB_CPU_ASYNC_EXCHANGE=1 (threads), 0 (the
// context's communicator) and auto (inline on a 2-CPU host): the same
// results and the same errors, from the wait.
#define HB_EXPERIMENTAL 1
#include <dirent.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/mp_check.h"
#include "hb.h"

int g_mp_rank = -1;
const char *g_mp_name = "mp_async";

namespace {

int g_world = 1;
// Short, so a mismatch that went undetected fails the test in seconds.
constexpr int64_t kTimeoutMs = 8000;

double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Rank r's input: values of very different magnitudes, so a sum in any other
// order than rank order differs in the last bits.
template <class T>
std::vector<T> input(int r, size_t n, uint64_t salt) {
  std::mt19937_64 g(salt * 1000003 + static_cast<uint64_t>(r));
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<T>(u(g) * (i % 7 == r % 7 ? 1e7 : 1.0));
  return v;
}

template <class T>
T fold(T a, T b, hb_reduce_op op) {
  switch (op) {
    case HB_MAX:
      return a > b ? a : b;
    case HB_MIN:
      return a < b ? a : b;
    default:
      return static_cast<T>(a + b);
  }
}

// Starts k requests of n elements (each in place on a copy of this rank's
// input), runs a blocking allreduce of the same inputs between the starts
// and the waits, and checks both against op(...op(x0, x1)..., x{w-1}).
template <class T>
void check_equal(hb_context *ctx, hb_dtype dt, hb_reduce_op op, size_t n,
                 int k) {
  std::vector<std::vector<T>> bufs, blocking;
  std::vector<hb_allreduce_request *> reqs(k, nullptr);
  for (int j = 0; j < k; ++j) bufs.push_back(input<T>(g_mp_rank, n, j));
  for (int j = 0; j < k; ++j)
    CHECK_OK(hb_allreduce_start(ctx, bufs[j].data(), bufs[j].data(), n, dt, op,
                                &reqs[j]));
  for (int j = 0; j < k; ++j) {
    std::vector<T> in = input<T>(g_mp_rank, n, j), out(n);
    CHECK_OK(hb_allreduce(ctx, in.data(), out.data(), n, dt, op));
    blocking.push_back(out);
  }
  for (int j = 0; j < k; ++j) CHECK_OK(hb_allreduce_wait(reqs[j]));
  for (int j = 0; j < k; ++j) {
    std::vector<T> want = input<T>(0, n, j);
    for (int r = 1; r < g_world; ++r) {
      std::vector<T> x = input<T>(r, n, j);
      for (size_t i = 0; i < n; ++i) want[i] = fold(want[i], x[i], op);
    }
    CHECK(std::memcmp(bufs[j].data(), blocking[j].data(), n * sizeof(T)) == 0,
          "request %d (n %zu, op %d): not bit-identical to hb_allreduce", j, n,
          op);
    CHECK(std::memcmp(bufs[j].data(), want.data(), n * sizeof(T)) == 0,
          "request %d (n %zu, op %d): not the rank-order fold", j, n, op);
  }
}

void mode_equal(hb_context *ctx) {
  // 1031: one round; 200k floats (800 KB): the two-phase, pieced route.
  for (size_t n : {size_t(1), size_t(1031), size_t(200000)}) {
    check_equal<float>(ctx, HB_FLOAT32, HB_SUM, n, 3);
    check_equal<double>(ctx, HB_FLOAT64, HB_SUM, n, 2);
  }
  check_equal<float>(ctx, HB_FLOAT32, HB_MAX, 4099, 2);
  check_equal<int64_t>(ctx, HB_INT64, HB_SUM, 777, 2);
  // Separate send and recv; send untouched.
  std::vector<float> in = input<float>(g_mp_rank, 513, 9), out(513), ref(513);
  const std::vector<float> copy = in;
  hb_allreduce_request *req = nullptr;
  CHECK_OK(hb_allreduce_start(ctx, in.data(), out.data(), in.size(), HB_FLOAT32,
                              HB_SUM, &req));
  CHECK_OK(hb_allreduce_wait(req));
  CHECK_OK(
      hb_allreduce(ctx, in.data(), ref.data(), in.size(), HB_FLOAT32, HB_SUM));
  CHECK(in == copy && std::memcmp(out.data(), ref.data(), 513 * 4) == 0,
        "out of place: send changed or result differs");
  // Argument errors: nothing in flight, *out NULL, the peers unaffected
  // (every rank makes them).
  req = reinterpret_cast<hb_allreduce_request *>(&in);
  hb_status st =
      hb_allreduce_start(ctx, nullptr, out.data(), 4, HB_FLOAT32, HB_SUM, &req);
  CHECK(st == HB_ERR_INVALID_ARGUMENT && req == nullptr &&
            std::strstr(hb_last_error(), "send"),
        "NULL send: %s: %s", hb_status_name(st), hb_last_error());
  st = hb_allreduce_start(ctx, in.data(), out.data(), 4, HB_FLOAT32,
                          static_cast<hb_reduce_op>(99), &req);
  CHECK(st == HB_ERR_INVALID_ARGUMENT, "bad op: %s", hb_status_name(st));
  st = hb_allreduce_wait(nullptr);
  CHECK(st == HB_ERR_INVALID_ARGUMENT, "wait(NULL): %s", hb_status_name(st));
  // Destroyed with a request in flight: the destroy lets it end, the wait
  // then reports it (and the result is complete).
  std::vector<float> last = input<float>(g_mp_rank, 100000, 5);
  CHECK_OK(hb_allreduce_start(ctx, last.data(), last.data(), last.size(),
                              HB_FLOAT32, HB_SUM, &req));
  hb_context_destroy(ctx);
  CHECK_OK(hb_allreduce_wait(req));
  std::vector<float> want = input<float>(0, last.size(), 5);
  for (int r = 1; r < g_world; ++r) {
    std::vector<float> x = input<float>(r, last.size(), 5);
    for (size_t i = 0; i < x.size(); ++i) want[i] += x[i];
  }
  CHECK(last == want, "the request in flight at destroy: wrong result");
}

void expect_mismatch(hb_allreduce_request *req, const char *what) {
  const double t0 = now_ms();
  hb_status st = hb_allreduce_wait(req);
  CHECK(st == HB_ERR_MISMATCH, "%s: wait gave %s: %s", what, hb_status_name(st),
        hb_last_error());
  std::printf("rank %d: %s: HB_ERR_MISMATCH after %.0f ms: %s\n", g_mp_rank,
              what, now_ms() - t0, hb_last_error());
}

void mode_mismatch(hb_context *ctx) {
  std::vector<double> buf(64, 1.0);
  hb_allreduce_request *req = nullptr;
  // The last rank reduces one element more.
  size_t n = g_mp_rank == g_world - 1 ? 33 : 32;
  CHECK_OK(hb_allreduce_start(ctx, buf.data(), buf.data(), n, HB_FLOAT64,
                              HB_SUM, &req));
  expect_mismatch(req, "counts 32 vs 33");
  // Rank 0 reduces float64, the others int64 (same bytes).
  CHECK_OK(hb_allreduce_start(ctx, buf.data(), buf.data(), 16,
                              g_mp_rank == 0 ? HB_FLOAT64 : HB_INT64, HB_SUM,
                              &req));
  expect_mismatch(req, "float64 vs int64");
  // The channel is consistent again: a matched call works.
  std::vector<float> ok(8, 1.0f);
  CHECK_OK(hb_allreduce_start(ctx, ok.data(), ok.data(), ok.size(), HB_FLOAT32,
                              HB_SUM, &req));
  CHECK_OK(hb_allreduce_wait(req));
  CHECK(ok[7] == static_cast<float>(g_world), "after mismatches: %g", ok[7]);
  hb_context_destroy(ctx);
}

void mode_peer(hb_context *ctx) {
  std::vector<float> buf(1 << 16, 1.0f);
  hb_allreduce_request *req = nullptr;
  // The channel exists on every rank first (its bootstrap is collective).
  CHECK_OK(hb_allreduce_start(ctx, buf.data(), buf.data(), buf.size(),
                              HB_FLOAT32, HB_SUM, &req));
  CHECK_OK(hb_allreduce_wait(req));
  CHECK_OK(hb_context_barrier(ctx, 0));
  const int victim = g_world - 1;
  if (g_mp_rank == victim) {
    usleep(300 * 1000);  // the others' requests are in flight by now
    std::fflush(stdout);
    _exit(0);  // dies without a word
  }
  CHECK_OK(hb_allreduce_start(ctx, buf.data(), buf.data(), buf.size(),
                              HB_FLOAT32, HB_SUM, &req));
  const double t0 = now_ms();
  hb_status st = hb_allreduce_wait(req);
  const double ms = now_ms() - t0;
  CHECK(st == HB_ERR_PEER_FAILED, "wait after rank %d died: %s: %s", victim,
        hb_status_name(st), hb_last_error());
  // Liveness, not the timeout, ends it.
  CHECK(ms < kTimeoutMs / 2, "the wait took %.0f ms", ms);
  std::printf("rank %d: wait failed after %.0f ms: %s\n", g_mp_rank, ms,
              hb_last_error());
  hb_context_destroy(ctx);
}

void mode_auto(hb_context *ctx) {
  // The vote, from the outside: this rank's CPUs, the fewer of its own and
  // its share of the host's; without 2, auto runs a job on the caller's
  // thread (always the first: the load is read over windows).
  cpu_set_t set;
  CPU_ZERO(&set);
  CHECK(sched_getaffinity(0, sizeof set, &set) == 0, "sched_getaffinity");
  const int own = CPU_COUNT(&set);
  const int share = int(sysconf(_SC_NPROCESSORS_ONLN)) /
                    std::max(1, int(hb_context_local_world_size(ctx)));
  const char *env = std::getenv("HB_CPU_ASYNC_EXCHANGE");
  const bool is_auto = !env || std::string(env) == "-1";
  const bool want_inline = is_auto && std::min(own, share) < 2;
  // The channel first (its bootstrap waits for every rank).
  std::vector<float> buf = input<float>(g_mp_rank, 1031, 3), ref(1031);
  hb_allreduce_request *req = nullptr;
  CHECK_OK(hb_allreduce_start(ctx, ref.data(), ref.data(), ref.size(),
                              HB_FLOAT32, HB_SUM, &req));
  CHECK_OK(hb_allreduce_wait(req));
  CHECK_OK(hb_allreduce(ctx, buf.data(), ref.data(), buf.size(), HB_FLOAT32,
                        HB_SUM));
  // The last rank starts late: inline, the others' start waits for it.
  // From a new thread: its rule has seen no window yet, so a loaded host
  // cannot have sent its jobs to the progress thread (deterministic).
  if (g_mp_rank == g_world - 1) usleep(500 * 1000);
  double ms = 0;
  std::thread([&] {
    const double t0 = now_ms();
    CHECK_OK(hb_allreduce_start(ctx, buf.data(), buf.data(), buf.size(),
                                HB_FLOAT32, HB_SUM, &req));
    ms = now_ms() - t0;
  }).join();
  CHECK_OK(hb_allreduce_wait(req));
  CHECK(std::memcmp(buf.data(), ref.data(), buf.size() * 4) == 0,
        "auto: not bit-identical to hb_allreduce");
  if (g_mp_rank != g_world - 1)
    CHECK(want_inline ? ms >= 400 : ms < 250,
          "%s, %d CPUs here (own %d, share %d): want %s, but the start took "
          "%.0f ms beside a rank 500 ms late",
          is_auto ? "auto" : env, std::min(own, share), own, share,
          want_inline ? "inline" : "on the thread", ms);
  std::printf("rank %d: %s (own %d CPUs, share %d): start %.0f ms\n", g_mp_rank,
              want_inline ? "inline" : "thread", own, share, ms);
  hb_context_destroy(ctx);
}

// Thread tid's scheduler slice in us ("se.slice" of
// /proc/self/task/<tid>/sched, in ns; 0: this thread), -1 if the kernel
// does not say (no custom slices before Linux 6.12, or no scheduler debug
// fields).
int64_t slice_us_of(long tid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%ld/sched",
                tid ? tid : long(syscall(SYS_gettid)));
  FILE *f = std::fopen(path, "r");
  if (!f) return -1;
  char line[256];
  long long ns = -1000;
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "se.slice", 8) == 0)
      ns = std::atoll(std::strchr(line, ':') + 1);
  std::fclose(f);
  return ns / 1000;
}

// How many threads of this process run with a slice of us.
int threads_with_slice(int64_t us) {
  int n = 0;
  DIR *d = opendir("/proc/self/task");
  CHECK(d != nullptr, "cannot list /proc/self/task");
  while (dirent *e = readdir(d))
    if (e->d_name[0] != '.' && slice_us_of(std::atol(e->d_name)) == us) ++n;
  closedir(d);
  return n;
}

void mode_slice(hb_context *ctx) {
  const char *env = std::getenv("HB_CPU_WAIT_SLICE_US");
  CHECK(env && std::atoll(env) == 150, "run with HB_CPU_WAIT_SLICE_US=150");
  const int64_t own = slice_us_of(0);
  if (own < 0 || own == 150) {
    std::printf("rank %d: no custom slices here (slice %lld): skipped\n",
                g_mp_rank, (long long)own);
    hb_context_destroy(ctx);
    return;
  }
  check_equal<float>(ctx, HB_FLOAT32, HB_SUM, 1031, 2);  // creates the thread
  // A start the last rank joins late: the caller waits, then has its own
  // slice back; the channel's progress thread keeps the option's.
  std::vector<float> x = input<float>(g_mp_rank, 64, 3), want(64);
  CHECK_OK(hb_allreduce(ctx, x.data(), want.data(), 64, HB_FLOAT32, HB_SUM));
  hb_allreduce_request *req = nullptr;
  if (g_mp_rank == g_world - 1) usleep(300 * 1000);
  CHECK_OK(hb_allreduce_start(ctx, x.data(), x.data(), 64, HB_FLOAT32, HB_SUM,
                              &req));
  CHECK_OK(hb_allreduce_wait(req));
  CHECK(std::memcmp(x.data(), want.data(), sizeof(float) * 64) == 0,
        "the started allreduce is not hb_allreduce's");
  CHECK(slice_us_of(0) == own,
        "the caller's slice is %lld us after the "
        "wait, was %lld",
        (long long)slice_us_of(0), (long long)own);
  const int n = threads_with_slice(150);
  CHECK(n >= 1, "no thread runs with cpu_wait_slice_us's 150 us slice");
  hb_context_destroy(ctx);
}

}  // namespace

int main(int argc, char **argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  std::string options = "timeout_ms=" + std::to_string(kTimeoutMs);
  hb_context_options opts = HB_CONTEXT_OPTIONS_INIT;
  opts.options = options.c_str();
  hb_context *ctx = nullptr;
  CHECK_OK(hb_context_create(&opts, &ctx));
  g_mp_rank = hb_context_rank(ctx);
  g_world = hb_context_world_size(ctx);
  if (mode == "equal")
    mode_equal(ctx);
  else if (mode == "mismatch")
    mode_mismatch(ctx);
  else if (mode == "peer")
    mode_peer(ctx);
  else if (mode == "auto")
    mode_auto(ctx);
  else if (mode == "slice")
    mode_slice(ctx);
  else
    CHECK(false, "usage: mp_async equal|mismatch|peer|auto|slice (got '%s')",
          mode.c_str());
  std::printf("rank %d/%d: mp_async %s passed\n", g_mp_rank, g_world,
              mode.c_str());
  return 0;
}
