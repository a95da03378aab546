// One rank of the kill-during-connect test (started by connect_kill_test,
// never by hbrun, which would stop the survivors itself). The last rank arms
// a SIGKILL HB_KILL_AFTER_US microseconds before its first allreduce, which
// is when the Gloo full mesh connects: it dies before, during or just after
// the connect. Every other rank loops allreduces and must get
// HB_ERR_PEER_FAILED naming the victim, within the liveness bound, and then
// destroy its context promptly.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "common/mp_check.h"
#include "hb.h"

int g_mp_rank = -1;
const char *g_mp_name = "mp_connect_kill";

namespace {

int64_t ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now() - t0)
      .count();
}

}  // namespace

int main() {
  hb_context *ctx = nullptr;
  hb_status created = hb_context_create(nullptr, &ctx);
  // The victim may die while another rank is still finishing its create:
  // that is a peer failure too, and must not hang either.
  if (created == HB_ERR_PEER_FAILED) return 0;
  CHECK_OK(created);
  g_mp_rank = hb_context_rank(ctx);
  const int victim = hb_context_world_size(ctx) - 1;
  // HB_LEAVE_AFTER=n: the victim leaves cleanly instead (n allreduces, then
  // hb_context_destroy and exit 0) while the others go on calling.
  const char *leave = std::getenv("HB_LEAVE_AFTER");
  float x = 1;
  if (leave && g_mp_rank == victim) {
    for (int i = 0; i < std::atoi(leave); ++i)
      CHECK_OK(hb_allreduce(ctx, &x, &x, 1, HB_FLOAT32, HB_MAX));
    hb_context_destroy(ctx);
    return 0;
  }
  if (!leave && g_mp_rank == victim) {
    // HB_STOP=1: SIGSTOP instead (the process stays, silent, until the
    // test kills it): the others must notice within peer_timeout_ms.
    const char *us = std::getenv("HB_KILL_AFTER_US");
    const long delay = us ? std::atol(us) : 0;
    const int sig = std::getenv("HB_STOP") ? SIGSTOP : SIGKILL;
    std::thread([delay, sig] {
      std::this_thread::sleep_for(std::chrono::microseconds(delay));
      raise(sig);
    }).detach();
  }
  char buf[32];
  CHECK_OK(
      hb_context_get_option(ctx, "peer_timeout_ms", buf, sizeof buf, nullptr));
  const int64_t bound = std::atoll(buf) + 3000;
  hb_status st = HB_OK;
  int64_t took = 0;
  for (int i = 0; i < 1000000 && st == HB_OK; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    st = hb_allreduce(ctx, &x, &x, 1, HB_FLOAT32, HB_MAX);
    took = ms_since(t0);
  }
  CHECK(g_mp_rank != victim, "the victim outlived its kill");
  std::fprintf(stderr, "r%d: %lld ms: %s\n", g_mp_rank, (long long)took,
               hb_last_error());
  CHECK(st == HB_ERR_PEER_FAILED, "allreduce after rank %d died: %s: %s",
        victim, hb_status_name(st), hb_last_error());
  CHECK(
      std::strstr(hb_last_error(), ("rank " + std::to_string(victim)).c_str()),
      "message does not name rank %d: %s", victim, hb_last_error());
  CHECK(!leave || std::strstr(hb_last_error(), "left the job"),
        "a clean leave not reported as one: %s", hb_last_error());
  CHECK(took < bound, "the failing call took %lld ms, bound %lld ms",
        (long long)took, (long long)bound);
  auto t0 = std::chrono::steady_clock::now();
  hb_context_destroy(ctx);
  CHECK(ms_since(t0) < 3000, "destroy took %lld ms", (long long)ms_since(t0));
  return 0;
}
