// One rank of the multi-host kill check (multihost_test.sh): rank VICTIM
// notes the time in FILE and SIGKILLs itself while every rank is in an
// allreduce loop; each other rank must get HB_ERR_PEER_FAILED naming it
// within 5 s of the kill. Its own hbrun stops the victim's neighbours with
// SIGTERM, so SIGTERM is blocked here: they report first, then exit 0.
// With "alltoallv" the loop is of uneven alltoallv calls instead (the
// collection's exchange: hierarchical across hosts, tests/multihost/
// hier_test.sh).
//   mh_kill VICTIM FILE [alltoallv]
#include <signal.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/mp_check.h"
#include "hb.h"

int g_mp_rank = -1;
const char *g_mp_name = "mh_kill";

namespace {

int64_t wall_ms() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);  // namespaces share the clock
  return int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 3 && !(argc == 4 && !std::strcmp(argv[3], "alltoallv"))) {
    std::fprintf(stderr, "usage: mh_kill VICTIM FILE [alltoallv]\n");
    return 2;
  }
  const bool a2a = argc == 4;
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigprocmask(SIG_BLOCK, &term, nullptr);
  const int victim = std::atoi(argv[1]);
  const char *file = argv[2];

  hb_context *ctx = nullptr;
  CHECK_OK(hb_context_create(nullptr, &ctx));
  g_mp_rank = hb_context_rank(ctx);
  std::vector<float> a(1 << 18, 1.f), b(a.size());
  for (int i = 0; i < 3; ++i)
    CHECK_OK(
        hb_allreduce(ctx, a.data(), b.data(), a.size(), HB_FLOAT32, HB_SUM));
  CHECK(b[0] == float(hb_context_world_size(ctx)), "allreduce gave %g", b[0]);
  // The victim may leave the barrier first: a survivor may see the kill
  // in the barrier itself, which counts as well.
  hb_status st = hb_context_barrier(ctx, 30000);
  if (g_mp_rank == victim) {
    CHECK(st == HB_OK, "barrier: %s", hb_last_error());
    FILE *f = std::fopen(file, "w");
    CHECK(f, "cannot write %s", file);
    std::fprintf(f, "%lld\n", static_cast<long long>(wall_ms()));
    std::fclose(f);
    raise(SIGKILL);
  }
  // alltoallv: rank r sends 100 (r + q + 1) floats to rank q.
  const int n = hb_context_world_size(ctx);
  std::vector<int64_t> sc(n), so(n), rc(n), ro(n);
  for (int q = 0, s = 0, r = 0; q < n; s += sc[q], r += rc[q], ++q) {
    sc[q] = rc[q] = 100 * (g_mp_rank + q + 1);
    so[q] = s, ro[q] = r;
  }
  const int64_t give_up = wall_ms() + 30000;
  while (st == HB_OK && wall_ms() < give_up)
    st = a2a ? hb_alltoallv(ctx, a.data(), sc.data(), so.data(), b.data(),
                            rc.data(), ro.data(), HB_FLOAT32)
             : hb_allreduce(ctx, a.data(), b.data(), a.size(), HB_FLOAT32,
                            HB_SUM);
  const int64_t seen = wall_ms();
  CHECK(st == HB_ERR_PEER_FAILED, "after rank %d was killed: %s: %s", victim,
        hb_status_name(st), hb_last_error());
  std::string name = "rank " + std::to_string(victim);
  CHECK(std::strstr(hb_last_error(), name.c_str()),
        "the error does not name %s: %s", name.c_str(), hb_last_error());
  long long killed = 0;
  FILE *f = std::fopen(file, "r");
  CHECK(f && std::fscanf(f, "%lld", &killed) == 1, "no kill time in %s", file);
  std::fclose(f);
  const long long delay = seen - killed;
  std::printf("rank %d: HB_ERR_PEER_FAILED %lld ms after rank %d was killed\n",
              g_mp_rank, delay, victim);
  std::fflush(stdout);
  CHECK(delay < 5000, "failure seen %lld ms after the kill (bound 5000)",
        delay);
  hb_context_destroy(ctx);
  return 0;
}
