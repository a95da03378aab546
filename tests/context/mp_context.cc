// One rank of a multi-process context test. Started N times, by hbrun
// (hb_add_mp_test) or by mp_spawn_test.cc with HB_RANK / HB_WORLD_SIZE /
// HB_RENDEZVOUS set. Exits 0 when every check on this rank passed.
//
//   mp_context basic   form the context, check identity, run barriers
//   mp_context kill    the last rank SIGKILLs itself; the others must get
//                      HB_ERR_PEER_FAILED naming it within the bound
//   mp_context token   the last rank presents a wrong token: it gets
//                      HB_ERR_PERMISSION, the others HB_ERR_TIMEOUT naming it
//   mp_context abort   rank 1 aborts; every rank gets HB_ERR_ABORTED + reason
//   mp_context kill0   rank 0, which serves the store, SIGKILLs itself; the
//                      others must get HB_ERR_PEER_FAILED within the bound
//   mp_context late    the last rank is late to a barrier: the others get
//                      HB_ERR_TIMEOUT naming it, and the next barrier works
//   mp_context tf      TF_CONFIG instead of HB_*: HB_TEST_RANK and
//                      HB_TEST_WORLD give the expected rank (a ps task
//                      checks it stays out of the world)
//   mp_context bye     rank 0 leaves first; its destroy waits for the others
//                      (when it serves the store)
//   mp_context launched  started by another launcher (torchrun-, MPI-,
//                      Slurm- or PMI-style variables, or mpirun itself):
//                      HB_TEST_RANK / HB_TEST_WORLD (else Open MPI's own
//                      variables) give the expected rank; the ranks
//                      allgather their ranks over the CPU transport
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/mp_check.h"
#include "context/context.h"
#include "hb.h"

int g_mp_rank = -1;
const char *g_mp_name = "mp_context";

namespace {

int env_int(const char *name) {
  const char *v = std::getenv(name);
  if (!v) hb_mp_fail(__LINE__, "%s is not set", name);
  return std::atoi(v);
}

int64_t ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now() - t0)
      .count();
}

bool contains(const char *text, const std::string &what) {
  return std::strstr(text, what.c_str()) != nullptr;
}

// "... ranks 1, 2 did not arrive ...": is rank in that list?
bool names_missing_rank(const char *text, int rank) {
  std::string s = text;
  size_t end = s.find(" did not arrive");
  size_t begin = s.rfind("ranks ", end);
  if (end == std::string::npos || begin == std::string::npos) return false;
  std::string list = ", " + s.substr(begin + 6, end - begin - 6) + ",";
  return list.find(", " + std::to_string(rank) + ",") != std::string::npos;
}

hb_context *create(const char *options) {
  hb_context_options o = HB_CONTEXT_OPTIONS_INIT;
  o.options = options;
  hb_context *ctx = nullptr;
  CHECK_OK(hb_context_create(&o, &ctx));
  return ctx;
}

void basic(int world) {
  hb_context *ctx = create(nullptr);
  CHECK(hb_context_rank(ctx) == g_mp_rank, "rank %d", hb_context_rank(ctx));
  CHECK(hb_context_world_size(ctx) == world, "world %d",
        hb_context_world_size(ctx));
  CHECK(hb_context_is_chief(ctx) == (g_mp_rank == 0 ? 1 : 0), "is_chief");
  CHECK(hb_context_task_id(ctx) == g_mp_rank, "task_id");
  CHECK(std::strcmp(hb_context_task_type(ctx), "worker") == 0, "task_type");
  int lr = hb_context_local_rank(ctx), lw = hb_context_local_world_size(ctx);
  CHECK(lr >= 0 && lr < lw && lw <= world, "local %d of %d", lr, lw);
  for (int i = 0; i < 20; ++i) {
    // Stagger the ranks so that barriers really wait.
    if (i % 5 == g_mp_rank % 5)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK_OK(hb_context_barrier(ctx, 10000));
  }
  hb_context_destroy(ctx);
  // A second context in the same process forms again.
  ctx = create(nullptr);
  CHECK_OK(hb_context_barrier(ctx, 0));
  hb_context_destroy(ctx);
}

// The victim may die as soon as it leaves this barrier: the others may
// learn of the death before their own reply (the failure wins).
void pass_barrier_unless_dead(hb_context *ctx, int victim) {
  hb_status st = hb_context_barrier(ctx, 10000);
  CHECK(st == HB_OK || (g_mp_rank != victim && st == HB_ERR_PEER_FAILED),
        "%s: %s", hb_status_name(st), hb_last_error());
}

void kill_last(int world) {
  hb_context *ctx = create(nullptr);
  int victim = world - 1;
  pass_barrier_unless_dead(ctx, victim);
  if (g_mp_rank == victim) raise(SIGKILL);
  int64_t bound = ctx->options.get_int("peer_timeout_ms") + 3000;
  auto t0 = std::chrono::steady_clock::now();
  hb_status st = hb_context_barrier(ctx, 60000);
  int64_t took = ms_since(t0);
  CHECK(st == HB_ERR_PEER_FAILED, "barrier after rank %d died: %s: %s", victim,
        hb_status_name(st), hb_last_error());
  CHECK(contains(hb_last_error(), "rank " + std::to_string(victim)),
        "message does not name rank %d: %s", victim, hb_last_error());
  CHECK(took < bound, "took %lld ms, bound %lld ms", (long long)took,
        (long long)bound);
  // Later calls fail the same way at once.
  t0 = std::chrono::steady_clock::now();
  st = hb_context_barrier(ctx, 60000);
  CHECK(st == HB_ERR_PEER_FAILED && ms_since(t0) < 1000, "second barrier: %s",
        hb_status_name(st));
  t0 = std::chrono::steady_clock::now();
  hb_context_destroy(ctx);
  CHECK(ms_since(t0) < 5000, "destroy after a failure took %lld ms",
        (long long)ms_since(t0));
  std::fprintf(stderr, "[mp_context r%d] saw rank %d fail after %lld ms\n",
               g_mp_rank, victim, (long long)took);
}

void kill_server(int world) {
  (void)world;
  hb_context *ctx = create(nullptr);
  pass_barrier_unless_dead(ctx, 0);
  if (g_mp_rank == 0) raise(SIGKILL);
  int64_t bound = ctx->options.get_int("peer_timeout_ms") + 3000;
  auto t0 = std::chrono::steady_clock::now();
  hb_status st = hb_context_barrier(ctx, 60000);
  int64_t took = ms_since(t0);
  CHECK(st == HB_ERR_PEER_FAILED, "barrier after rank 0 died: %s: %s",
        hb_status_name(st), hb_last_error());
  CHECK(contains(hb_last_error(), "rendezvous server"),
        "message does not name the store: %s", hb_last_error());
  CHECK(took < bound, "took %lld ms, bound %lld ms", (long long)took,
        (long long)bound);
  hb_context_destroy(ctx);
}

void late(int world) {
  hb_context *ctx = create(nullptr);
  int last = world - 1;
  if (g_mp_rank == last) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    // The others gave up: now this rank is the one left waiting.
    hb_status st = hb_context_barrier(ctx, 300);
    CHECK(st == HB_ERR_TIMEOUT && names_missing_rank(hb_last_error(), 0),
          "late rank: %s: %s", hb_status_name(st), hb_last_error());
  } else {
    hb_status st = hb_context_barrier(ctx, 300);
    CHECK(st == HB_ERR_TIMEOUT, "%s: %s", hb_status_name(st), hb_last_error());
    CHECK(names_missing_rank(hb_last_error(), last),
          "timeout does not name rank %d: %s", last, hb_last_error());
  }
  // A timed-out barrier does not break the context.
  CHECK_OK(hb_context_barrier(ctx, 20000));
  hb_context_destroy(ctx);
}

void tf(int world) {
  hb_context *ctx = create(nullptr);
  if (std::strcmp(hb_context_task_type(ctx), "ps") == 0) {
    CHECK(hb_context_is_chief(ctx) == 0, "a ps is never the chief");
    CHECK(hb_context_world_size(ctx) == 1, "ps world %d",
          hb_context_world_size(ctx));
    CHECK_OK(hb_context_barrier(ctx, 1000));  // its own world: no network
    hb_context_destroy(ctx);
    return;
  }
  CHECK(hb_context_rank(ctx) == g_mp_rank, "rank %d", hb_context_rank(ctx));
  CHECK(hb_context_world_size(ctx) == world, "world %d",
        hb_context_world_size(ctx));
  CHECK(hb_context_is_chief(ctx) == (g_mp_rank == 0), "is_chief");
  const char *want_type = g_mp_rank == 0 ? "chief" : "worker";
  CHECK(std::strcmp(hb_context_task_type(ctx), want_type) == 0, "task_type %s",
        hb_context_task_type(ctx));
  CHECK(hb_context_task_id(ctx) == (g_mp_rank == 0 ? 0 : g_mp_rank - 1),
        "task_id %d", hb_context_task_id(ctx));
  // Every task is on 127.0.0.1: one host.
  CHECK(hb_context_local_rank(ctx) == g_mp_rank &&
            hb_context_local_world_size(ctx) == world,
        "local %d of %d", hb_context_local_rank(ctx),
        hb_context_local_world_size(ctx));
  for (int i = 0; i < 5; ++i) CHECK_OK(hb_context_barrier(ctx, 10000));
  hb_context_destroy(ctx);
}

void token(int world) {
  int intruder = world - 1;
  hb_context *ctx = nullptr;
  hb_context_options o = HB_CONTEXT_OPTIONS_INIT;
  // Rank 0 serves the store: it gives up last, so that the others see their
  // own timeout rather than the store going away.
  o.options = g_mp_rank == intruder
                  ? "rendezvous_token=wrong,connect_timeout_ms=10000"
              : g_mp_rank == 0 ? "connect_timeout_ms=4500"
                               : "connect_timeout_ms=3000";
  auto t0 = std::chrono::steady_clock::now();
  hb_status st = hb_context_create(&o, &ctx);
  int64_t took = ms_since(t0);
  CHECK(ctx == nullptr, "a failed create returned a context");
  if (g_mp_rank == intruder) {
    CHECK(st == HB_ERR_PERMISSION, "intruder: %s: %s", hb_status_name(st),
          hb_last_error());
  } else {
    CHECK(st == HB_ERR_TIMEOUT, "%s: %s", hb_status_name(st), hb_last_error());
    CHECK(names_missing_rank(hb_last_error(), intruder),
          "timeout does not name rank %d: %s", intruder, hb_last_error());
    CHECK(took < 4500 + 3000, "took %lld ms", (long long)took);
  }
  std::fprintf(stderr, "[mp_context r%d] %s: %s\n", g_mp_rank,
               hb_status_name(st), hb_last_error());
}

void abort_by_rank1(int world) {
  (void)world;
  hb_context *ctx = create(nullptr);
  // Rank 1 may abort as soon as it leaves this barrier: the others may see
  // the abort before their own reply (the abort wins).
  hb_status st0 = hb_context_barrier(ctx, 10000);
  CHECK(st0 == HB_OK || (g_mp_rank != 1 && st0 == HB_ERR_ABORTED), "%s: %s",
        hb_status_name(st0), hb_last_error());
  if (g_mp_rank == 1) CHECK_OK(hb_context_abort(ctx, "stop now"));
  auto t0 = std::chrono::steady_clock::now();
  hb_status st = hb_context_barrier(ctx, 60000);
  CHECK(st == HB_ERR_ABORTED, "%s: %s", hb_status_name(st), hb_last_error());
  CHECK(contains(hb_last_error(), "stop now"), "reason lost: %s",
        hb_last_error());
  CHECK(ms_since(t0) < 5000, "abort took %lld ms to arrive",
        (long long)ms_since(t0));
  hb_context_destroy(ctx);
}

void bye(int world) {
  (void)world;
  hb_context *ctx = create(nullptr);
  CHECK_OK(hb_context_barrier(ctx, 10000));
  auto t0 = std::chrono::steady_clock::now();
  if (g_mp_rank == 0) {
    hb_context_destroy(ctx);
    int64_t took = ms_since(t0);
    if (std::getenv("HB_RENDEZVOUS_SERVED")) {
      // hbrun serves the store: rank 0 has nothing to wait for.
      CHECK(took < 2000, "rank 0 destroy took %lld ms", (long long)took);
    } else {
      // It waited for the others (who leave after ~1 s), but not for long.
      CHECK(took >= 700 && took < 10000, "rank 0 destroy took %lld ms",
            (long long)took);
    }
    return;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  CHECK(ctx->health.ok(), "the store went away under rank %d: %s", g_mp_rank,
        ctx->health.message().c_str());
  hb_context_destroy(ctx);
}

void launched(int world) {
  hb_context *ctx = create(nullptr);
  CHECK(hb_context_rank(ctx) == g_mp_rank, "rank %d", hb_context_rank(ctx));
  CHECK(hb_context_world_size(ctx) == world, "world %d",
        hb_context_world_size(ctx));
  if (const char *lr = std::getenv("HB_TEST_LOCAL_RANK"))
    CHECK(hb_context_local_rank(ctx) == std::atoi(lr), "local rank %d",
          hb_context_local_rank(ctx));
  int32_t mine = g_mp_rank;
  std::vector<int32_t> all(world, -1);
  CHECK_OK(hb_allgather(ctx, &mine, all.data(), 1, HB_INT32));
  for (int r = 0; r < world; ++r)
    CHECK(all[r] == r, "allgather[%d] = %d", r, all[r]);
  CHECK_OK(hb_context_barrier(ctx, 30000));
  hb_context_destroy(ctx);
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr,
                 "usage: mp_context "
                 "basic|kill|kill0|late|token|abort|bye|tf|launched\n");
    return 2;
  }
  std::string mode = argv[1];
  bool tf_mode = mode == "tf";
  bool launched_mode = mode == "launched";
  bool mpi = launched_mode && !std::getenv("HB_TEST_RANK");
  g_mp_rank = env_int(mpi                        ? "OMPI_COMM_WORLD_RANK"
                      : tf_mode || launched_mode ? "HB_TEST_RANK"
                                                 : "HB_RANK");
  int world = env_int(mpi                        ? "OMPI_COMM_WORLD_SIZE"
                      : tf_mode || launched_mode ? "HB_TEST_WORLD"
                                                 : "HB_WORLD_SIZE");
  if (mode == "basic")
    basic(world);
  else if (mode == "kill")
    kill_last(world);
  else if (mode == "token")
    token(world);
  else if (mode == "abort")
    abort_by_rank1(world);
  else if (mode == "bye")
    bye(world);
  else if (mode == "kill0")
    kill_server(world);
  else if (mode == "late")
    late(world);
  else if (tf_mode)
    tf(world);
  else if (launched_mode)
    launched(world);
  else
    hb_mp_fail(__LINE__, "unknown mode %s", mode.c_str());
  std::fprintf(stderr, "[mp_context r%d] %s ok\n", g_mp_rank, mode.c_str());
  return 0;
}
