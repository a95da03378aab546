// One rank of "last call, then destroy at once" (issue 30, item 2): after a
// warm-up, each rank sleeps a random 0-3 ms, makes one last collective call
// and destroys its context right away, as users end jobs. A rank that
// finished its part and left must not fail a peer whose transfers with it
// are complete. Exit 0: the call succeeded (and its result is right); 3:
// it failed (the message on stderr); 4: no context (the job did not start,
// e.g. its rendezvous port was taken); 5: the warm-up failed. The harness
// runs a job that did not reach its last call again, and says so.
//   mp_last_call allreduce_small|allreduce_1m|alltoallv|coll_update|
//                table_create
#define HB_EXPERIMENTAL 1
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/mp_check.h"
#include "hb.h"

int g_mp_rank = 0;
const char *g_mp_name = "mp_last_call";

namespace {

int g_world = 1;

[[noreturn]] void last_call_failed(const char *what, hb_status st) {
  std::fprintf(stderr, "[mp_last_call r%d] LAST CALL FAILED: %s: %s: %s\n",
               g_mp_rank, what, hb_status_name(st), hb_last_error());
  std::fflush(stderr);
  _exit(3);
}

void random_delay() {
  std::mt19937 gen(
      unsigned(getpid()) * 2654435761u ^
      unsigned(std::chrono::steady_clock::now().time_since_epoch().count()));
  std::this_thread::sleep_for(std::chrono::microseconds(
      std::uniform_int_distribution<int>(0, 3000)(gen)));
}

void allreduce(hb_context *ctx, size_t count) {
  std::vector<float> x(count), y(count);
  for (size_t i = 0; i < count; ++i) x[i] = float(g_mp_rank + 1) + float(i % 7);
  random_delay();
  hb_status st =
      hb_allreduce(ctx, x.data(), y.data(), count, HB_FLOAT32, HB_SUM);
  if (st != HB_OK) last_call_failed("allreduce", st);
  const float ranks = float(g_world * (g_world + 1) / 2);
  for (size_t i = 0; i < count; ++i)
    CHECK(y[i] == ranks + float(g_world) * float(i % 7),
          "allreduce element %zu: %g", i, double(y[i]));
}

void alltoallv(hb_context *ctx) {
  // 1 + p + r elements from rank r to rank p, value 1000 r + p.
  std::vector<int64_t> sc(static_cast<size_t>(g_world)),
      rc(static_cast<size_t>(g_world));
  std::vector<int32_t> send, recv;
  for (int p = 0; p < g_world; ++p) {
    sc[size_t(p)] = 1000 + p + g_mp_rank;
    rc[size_t(p)] = 1000 + g_mp_rank + p;
    send.insert(send.end(), size_t(sc[size_t(p)]), 1000 * g_mp_rank + p);
  }
  size_t total = 0;
  for (int64_t c : rc) total += size_t(c);
  recv.assign(total, -1);
  random_delay();
  hb_status st = hb_alltoallv(ctx, send.data(), sc.data(), nullptr, recv.data(),
                              rc.data(), nullptr, HB_INT32);
  if (st != HB_OK) last_call_failed("alltoallv", st);
  size_t at = 0;
  for (int q = 0; q < g_world; ++q)
    for (int64_t i = 0; i < rc[size_t(q)]; ++i, ++at)
      CHECK(recv[at] == 1000 * q + g_mp_rank, "alltoallv from %d: %d", q,
            recv[at]);
}

// A dynamic table of 8-wide rows (the defaults otherwise).
hb_embedding_config table_config() {
  hb_embedding_config cfg = HB_EMBEDDING_CONFIG_INIT;
  cfg.name = "last_call";
  cfg.dim = 8;
  return cfg;
}

hb_embedding *make_table(hb_context *ctx) {
  const hb_embedding_config cfg = table_config();
  hb_embedding *emb = nullptr;
  random_delay();
  hb_status st = hb_embedding_create(ctx, &cfg, &emb);
  if (st != HB_OK) last_call_failed("hb_embedding_create", st);
  return emb;
}

// A lookup, then (the last call) the gradient step reusing its plan.
void coll_update(hb_context *ctx) {
  const hb_embedding_config cfg = table_config();
  hb_embedding *emb = nullptr;
  CHECK_OK(hb_embedding_create(ctx, &cfg, &emb));
  hb_collection_feature f = HB_COLLECTION_FEATURE_INIT;
  f.table = emb;
  hb_collection *coll = nullptr;
  CHECK_OK(hb_collection_create(ctx, &f, 1, &coll));
  const int64_t batch = 64;
  std::vector<int64_t> ids(static_cast<size_t>(batch)),
      lengths(static_cast<size_t>(batch), 1);
  for (int64_t i = 0; i < batch; ++i) ids[size_t(i)] = i * 7 + g_mp_rank;
  const int64_t *idp = ids.data(), *lp = lengths.data();
  hb_jagged_batch b = HB_JAGGED_BATCH_INIT;
  b.batch_size = batch;
  b.ids = &idp;
  b.lengths = &lp;
  std::vector<float> out(static_cast<size_t>(batch * 8)),
      grad(static_cast<size_t>(batch * 8), 0.25f);
  CHECK_OK(hb_collection_lookup(coll, &b, out.data(), nullptr));
  random_delay();
  hb_status st = hb_collection_apply_gradients(coll, &b, grad.data(), nullptr);
  if (st != HB_OK) last_call_failed("hb_collection_apply_gradients", st);
  hb_collection_destroy(coll);
  hb_embedding_destroy(emb);
}

}  // namespace

int main(int argc, char **argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  hb_context *ctx = nullptr;
  hb_status st = hb_context_create(nullptr, &ctx);
  if (st != HB_OK) {  // e.g. another job took the rendezvous port first
    std::fprintf(stderr, "[mp_last_call] no context: %s: %s\n",
                 hb_status_name(st), hb_last_error());
    return 4;
  }
  g_mp_rank = hb_context_rank(ctx);
  g_world = hb_context_world_size(ctx);
  // Warm-up: the mesh is connected before the last call.
  float one = 1, sum = 0;
  st = hb_allreduce(ctx, &one, &sum, 1, HB_FLOAT32, HB_SUM);
  if (st != HB_OK) {
    std::fprintf(stderr, "[mp_last_call r%d] warm-up failed: %s: %s\n",
                 g_mp_rank, hb_status_name(st), hb_last_error());
    return 5;
  }
  if (what == "allreduce_small")
    allreduce(ctx, 16);
  else if (what == "allreduce_1m")
    allreduce(ctx, size_t(1) << 18);  // 1 MiB of float32
  else if (what == "alltoallv")
    alltoallv(ctx);
  else if (what == "coll_update")
    coll_update(ctx);
  else if (what == "table_create")
    hb_embedding_destroy(make_table(ctx));
  else {
    std::fprintf(stderr,
                 "usage: mp_last_call allreduce_small|allreduce_1m|alltoallv|"
                 "coll_update|table_create\n");
    return 2;
  }
  hb_context_destroy(ctx);
  return 0;
}
