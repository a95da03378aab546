// Embedding collections through the public API on real processes (hbrun):
//   mp_collection train DIR  bit-equal training vs the reference; then the
//                            tables of the collection are saved, trained
//                            on, loaded back (the collection keeps working)
//                            and exported; the export is checked
//   mp_collection mismatch   ranks create collections of different
//                            features: every rank fails, naming them; ranks
//                            call different collections: every rank gets
//                            HB_ERR_MISMATCH
//   mp_collection badbatch   one rank passes a bad batch (NULL, too small a
//                            struct_size) to lookup or apply: every rank
//                            fails at once naming it, nothing changes, and
//                            the next matched step is bit-equal
//   mp_collection pipeline   the pipelined step (lookup_start / _wait with
//                            the previous batch's update in between) is
//                            bit-equal to the reference's unpipelined one,
//                            in as many rounds; misuse and a bad batch on
//                            one rank fail every rank at once
//   mp_collection async      the asynchronous start (progress thread):
//                            it returns before a late peer joins its
//                            rounds, the steps stay bit-equal, a collection
//                            or a context destroyed with a start in flight
//                            goes cleanly
//   mp_collection asyncpeer  the last rank dies while the others' start is
//                            in flight: their wait fails with
//                            HB_ERR_PEER_FAILED
//   mp_collection dense      hb_collection_apply_gradients_dense: tables
//                            bit-equal to the reference, the dense sum to
//                            hb_allreduce's, with the plan reused or not
//   mp_collection densemismatch  different dense counts: HB_ERR_MISMATCH
//                            everywhere; a bad buffer: HB_ERR_INVALID_ARGUMENT
//   mp_collection densepeer  a rank dies before the update: the others get
//                            HB_ERR_PEER_FAILED
//   mp_collection realistic  tables of the demo's widths and float32 rows
//                            behind an odd-width float16 table's in each
//                            rows block (unaligned): lookups bit-equal to
//                            a world-1 context's, then to the reference
//                            over training steps; the last rank dies
//                            right after a lookup: the others' outputs
//                            are right and their next call fails with
//                            HB_ERR_PEER_FAILED
//   mp_collection rounds     (cpu_async_exchange=0, the call board) the
//                            lookup's header rides in its ids round: one
//                            board post per start, one for the rows, one
//                            per update; an id out of range on one rank
//                            fails every rank in that one round, as does
//                            an update on one rank beside a lookup on the
//                            others (HB_ERR_MISMATCH); the next step is
//                            bit-equal
// Every rank computes the whole reference itself from the shared seeds.
#define HB_EXPERIMENTAL 1
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <random>
#include <string>

#include "collection_ref.h"
#include "comm/backend.h"
#include "comm/communicator.h"
#include "common/mp_check.h"
#include "context/context.h"

int g_mp_rank = 0;
const char *g_mp_name = "mp_collection";

namespace {

int g_rank = 0, g_world = 1;

using hbtest::CollCase;
using hbtest::CollRef;
using hbtest::JBatch;

// Rounds of a lookup's header and ids: one where the exchange learns the
// receive sizes from the round (the call board, as the context's
// communicator, whose options the collection's channel shares), else two.
uint64_t header_ids_rounds(hb_context *ctx) {
  return hb::comm::cpu_backend(hb::ctx_ref(ctx)).sized_in_one_round() ? 1 : 2;
}

// The case's features over these tables.
std::vector<hb_collection_feature> feature_list(
    const CollCase &c, const std::vector<hb_embedding *> &tables) {
  std::vector<hb_collection_feature> fs;
  for (size_t f = 0; f < c.features.size(); ++f) {
    hb_collection_feature x = HB_COLLECTION_FEATURE_INIT;
    x.name = c.names[f].c_str();
    x.table = tables[c.features[f].table];
    x.pooling = c.features[f].pooling;
    fs.push_back(x);
  }
  return fs;
}

struct Model {
  std::vector<hb_embedding *> tables;
  hb_collection *coll = nullptr;
  Model(hb_context *ctx, const CollCase &c, bool alt_pooling = false) {
    for (const auto &cfg : c.tables) {
      hb_embedding *e = nullptr;
      CHECK_OK(hb_embedding_create(ctx, &cfg, &e));
      tables.push_back(e);
    }
    std::vector<hb_collection_feature> fs = feature_list(c, tables);
    for (hb_collection_feature &x : fs)
      if (alt_pooling && x.pooling == HB_POOLING_SUM)
        x.pooling = HB_POOLING_MEAN;
    CHECK_OK(hb_collection_create(ctx, fs.data(), fs.size(), &coll));
  }
  ~Model() {
    hb_collection_destroy(coll);  // before its tables
    for (hb_embedding *e : tables) hb_embedding_destroy(e);
  }
};

// One step on the collection (this rank's batch) and on the reference (all
// batches), checking the outputs bit for bit.
void step(Model &m, CollRef &ref, std::vector<JBatch> &all, int s) {
  const CollCase &c = ref.c;
  JBatch &b = all[g_rank];
  const int64_t W = hbtest::coll_width(c);
  CHECK(hb_collection_pooled_width(m.coll) == W, "pooled width");
  std::vector<float> want;
  std::vector<std::vector<float>> want_unp;
  for (int r = 0; r < g_world; ++r) {
    std::vector<float> o;
    std::vector<std::vector<float>> u;
    ref.lookup(all[r], &o, &u);
    if (r == g_rank) want = o, want_unp = u;
  }
  ref.apply(all);
  std::vector<float> out(b.B * W, -7.0f);
  std::vector<std::vector<float>> unp(c.features.size());
  std::vector<float *> up(c.features.size());
  std::vector<const float *> gup(c.features.size());
  for (size_t f = 0; f < c.features.size(); ++f) {
    unp[f].assign(b.n(f) * hb_collection_feature_dim(m.coll, f), -7.0f);
    up[f] = unp[f].data();
    gup[f] = b.grad_unpooled[f].data();
  }
  hb_jagged_batch v = b.view();
  CHECK_OK(hb_collection_lookup(m.coll, &v, out.data(), up.data()));
  CHECK(out.empty() || !std::memcmp(out.data(), want.data(), out.size() * 4),
        "step %d: pooled output differs", s);
  for (size_t f = 0; f < c.features.size(); ++f)
    CHECK(
        c.features[f].pooling != HB_POOLING_NONE || unp[f].empty() ||
            !std::memcmp(unp[f].data(), want_unp[f].data(), unp[f].size() * 4),
        "step %d: unpooled output of feature %zu differs", s, f);
  CHECK_OK(
      hb_collection_apply_gradients(m.coll, &v, b.grad_out.data(), gup.data()));
}

void mode_train(hb_context *ctx, const std::string &dir) {
  CollCase c = hbtest::standard_case();
  CollRef ref(c);
  Model m(ctx, c);
  std::mt19937_64 g(77);
  int s = 0;
  for (; s < 5; ++s) {
    std::vector<JBatch> all = hbtest::make_step(g, c, g_world);
    step(m, ref, all, s);
  }
  hb_collection_stats st = HB_COLLECTION_STATS_INIT;
  CHECK_OK(hb_collection_get_stats(m.coll, &st));
  // Per step: header and ids, rows, partial sums.
  CHECK(st.rounds == (header_ids_rounds(ctx) + 2) * s &&
            st.reused_plans == static_cast<uint64_t>(s),
        "%llu rounds, %llu reused in %d steps", (unsigned long long)st.rounds,
        (unsigned long long)st.reused_plans, s);
  // Save, train two steps, load back, train the same two steps again.
  for (hb_embedding *e : m.tables) CHECK_OK(hb_embedding_save(e, dir.c_str()));
  CollRef saved = ref;
  std::mt19937_64 g_after = g;
  for (int k = 0; k < 2; ++k, ++s) {
    std::vector<JBatch> all = hbtest::make_step(g, c, g_world);
    step(m, ref, all, s);
  }
  for (hb_embedding *e : m.tables) CHECK_OK(hb_embedding_load(e, dir.c_str()));
  ref = saved;
  g = g_after;
  for (int k = 0; k < 2; ++k, ++s) {
    std::vector<JBatch> all = hbtest::make_step(g, c, g_world);
    step(m, ref, all, s);
  }
  // Export every table and compare the served rows with the reference.
  for (size_t t = 0; t < m.tables.size(); ++t) {
    std::string file = dir + "/" + c.tables[t].name + ".hbe";
    CHECK_OK(hb_embedding_export(m.tables[t], file.c_str()));
    CHECK_OK(hb_context_barrier(ctx, 0));
    hb_embedding *sv = nullptr;
    CHECK_OK(hb_embedding_open(file.c_str(), &sv));
    const hbtest::RefTable &rt = ref.tables[t];
    for (const auto &kv : rt.rows) {
      std::vector<float> row(rt.c.dim);
      CHECK_OK(hb_embedding_lookup(sv, &kv.first, 1, row.data()));
      CHECK(!std::memcmp(row.data(), kv.second.w.data(), rt.c.dim * 4),
            "table %s: exported row %lld differs", rt.name.c_str(),
            (long long)kv.first);
    }
    if (rt.c.num_rows == 0)
      CHECK(hb_embedding_local_rows(sv) == static_cast<int64_t>(rt.rows.size()),
            "table %s: %lld rows exported, %zu in the reference",
            rt.name.c_str(), (long long)hb_embedding_local_rows(sv),
            rt.rows.size());
    hb_embedding_destroy(sv);
  }
}

// Ranks that create collections of different features all fail, the
// message naming the feature, what differs (its table, pooling, dim) and
// every rank's value; rank 1 is the odd one.
void create_mismatch(hb_context *ctx, const CollCase &c, const Model &m) {
  std::vector<hb_collection_feature> fs = feature_list(c, m.tables);
  if (g_rank == 1) {
    fs[2].pooling = HB_POOLING_SUM;  // SQRTN elsewhere
    fs[4].table = m.tables[0];       // 'ta' (dim 3) for 'tc' (dim 2)
  }
  hb_collection *coll = nullptr;
  hb_status st = hb_collection_create(ctx, fs.data(), fs.size(), &coll);
  CHECK(st == HB_ERR_INVALID_ARGUMENT && !coll, "create gave %s: %s",
        hb_status_name(st), hb_last_error());
  const std::string others = g_world == 2 ? "(rank 0)" : "(ranks 0,2)";
  for (const std::string &n :
       {std::string("hb_collection_create"), std::string("rank 1 differs"),
        "feature 2 ('f2') pooling: HB_POOLING_SQRTN " + others +
            " vs HB_POOLING_SUM (rank 1)",
        "feature 4 ('f4') table: 'tc' " + others + " vs 'ta' (rank 1)",
        "feature 4 ('f4') dim: 2 " + others + " vs 3 (rank 1)"})
    CHECK(std::strstr(hb_last_error(), n.c_str()), "message lacks '%s': %s",
          n.c_str(), hb_last_error());
  // A fingerprint only where no named field differs.
  CHECK(!std::strstr(hb_last_error(), "table config"), "message: %s",
        hb_last_error());
}

void mode_mismatch(hb_context *ctx) {
  CollCase c = hbtest::standard_case();
  // b: other tables (names are unique per context) and other pooling.
  CollCase cb = c;
  std::vector<std::string> names;
  for (const auto &t : cb.tables) names.push_back(std::string(t.name) + "_b");
  for (size_t t = 0; t < cb.tables.size(); ++t)
    cb.tables[t].name = names[t].c_str();
  Model a(ctx, c), b(ctx, cb, /*alt_pooling=*/true);
  if (g_world > 1) create_mismatch(ctx, c, a);
  std::mt19937_64 g(5);
  JBatch batch = hbtest::make_jbatch(g, c, 0);
  hb_jagged_batch v = batch.view();
  std::vector<float *> up(c.features.size(), nullptr);
  hb_status st = hb_collection_lookup(g_rank == 0 ? a.coll : b.coll, &v,
                                      nullptr, up.data());
  if (g_world == 1) {
    CHECK(st == HB_OK, "world 1: %s", hb_last_error());
    return;
  }
  CHECK(st == HB_ERR_MISMATCH, "got %s: %s", hb_status_name(st),
        hb_last_error());
  CHECK(std::strstr(hb_last_error(), "made a different call"), "message: %s",
        hb_last_error());
  // A mismatched call counts on no rank: matched calls on either
  // collection work next.
  std::vector<float> out(batch.B * hbtest::coll_width(c));
  std::vector<std::vector<float>> unp(c.features.size());
  for (size_t f = 0; f < c.features.size(); ++f) {
    unp[f].resize(batch.n(f) * hb_collection_feature_dim(a.coll, f));
    up[f] = unp[f].data();
  }
  CHECK_OK(hb_collection_lookup(a.coll, &v, out.data(), up.data()));
  CHECK_OK(hb_collection_lookup(b.coll, &v, out.data(), up.data()));
  // Rank 0 updates (planning: its header has a lookup's size) while the
  // others look up: HB_ERR_MISMATCH everywhere, then matched calls work.
  std::vector<const float *> gup(c.features.size());
  for (size_t f = 0; f < c.features.size(); ++f)
    gup[f] = batch.grad_unpooled[f].data();
  CHECK_OK(hb_collection_apply_gradients(a.coll, &v, batch.grad_out.data(),
                                         gup.data()));
  st = g_rank == 0 ? hb_collection_apply_gradients(
                         a.coll, &v, batch.grad_out.data(), gup.data())
                   : hb_collection_lookup(a.coll, &v, out.data(), up.data());
  CHECK(st == HB_ERR_MISMATCH, "update vs lookup: got %s: %s",
        hb_status_name(st), hb_last_error());
  CHECK_OK(hb_collection_lookup(a.coll, &v, out.data(), up.data()));
  CHECK_OK(hb_collection_apply_gradients(a.coll, &v, batch.grad_out.data(),
                                         gup.data()));
}

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// The context runs with timeout_ms = kBadTimeoutMs here: a rank left
// waiting for the bad one would fail with HB_ERR_TIMEOUT after it; an
// error that travels in the header comes back far sooner.
constexpr int64_t kBadTimeoutMs = 20000;

// Checks the status of a call in which rank `bad` passed a bad batch.
void expect_bad(hb_status st, double seconds, int bad, const char *call,
                const char *own) {
  CHECK(st == HB_ERR_INVALID_ARGUMENT, "%s (rank %d bad): got %s: %s", call,
        bad, hb_status_name(st), hb_last_error());
  CHECK(seconds < kBadTimeoutMs / 4000.0, "%s: the error took %.1f s", call,
        seconds);
  const char *msg = hb_last_error();
  CHECK(std::strstr(msg, call), "%s: message '%s'", call, msg);
  if (g_rank == bad) {
    CHECK(std::strstr(msg, own), "%s: message '%s' lacks '%s'", call, msg, own);
    return;
  }
  char who[64];
  std::snprintf(who, sizeof who, "rank %d failed with HB_ERR_INVALID_ARGUMENT",
                bad);
  CHECK(std::strstr(msg, who), "%s: message '%s' lacks '%s'", call, msg, who);
}

void mode_bad_batch(hb_context *ctx) {
  CollCase c = hbtest::standard_case();
  CollRef ref(c);
  Model m(ctx, c);
  std::mt19937_64 g(91);
  int s = 0;
  std::vector<JBatch> first = hbtest::make_step(g, c, g_world);
  step(m, ref, first, s++);
  const int64_t W = hbtest::coll_width(c);
  // kind 0: lookup; 1: apply after a lookup of the same ids (the good
  // ranks send their partial sums at once, reusing the lookup's plan); 2:
  // apply after an apply (no lookup to reuse: it plans first).
  for (int kind = 0; kind < 3; ++kind)
    for (int null_batch = 0; null_batch < 2; ++null_batch) {
      const int bad = (2 * kind + null_batch + 1) % g_world;
      std::vector<JBatch> all = hbtest::make_step(g, c, g_world);
      JBatch &b = all[g_rank];
      hb_jagged_batch v = b.view();
      std::vector<float> out(b.B * W);
      std::vector<std::vector<float>> unp(c.features.size());
      std::vector<float *> up(c.features.size());
      std::vector<const float *> gup(c.features.size());
      for (size_t f = 0; f < c.features.size(); ++f) {
        unp[f].resize(b.n(f) * hb_collection_feature_dim(m.coll, f));
        up[f] = unp[f].data();
        gup[f] = b.grad_unpooled[f].data();
      }
      if (kind == 1)
        CHECK_OK(hb_collection_lookup(m.coll, &v, out.data(), up.data()));
      hb_jagged_batch small = v;
      small.struct_size = sizeof(size_t);
      const hb_jagged_batch *arg = g_rank != bad ? &v
                                   : null_batch  ? nullptr
                                                 : &small;
      const char *own = null_batch ? "batch is NULL" : "is too small";
      double t0 = now_s();
      hb_status st;
      const char *call;
      if (kind == 0) {
        call = "hb_collection_lookup";
        st = hb_collection_lookup(m.coll, arg, out.data(), up.data());
      } else {
        call = "hb_collection_apply_gradients";
        st = hb_collection_apply_gradients(m.coll, arg, b.grad_out.data(),
                                           gup.data());
      }
      expect_bad(st, now_s() - t0, bad, call, own);
      // The next matched step works, bit-equal to the reference that
      // never saw the failed call (so the failed call changed nothing).
      step(m, ref, all, s++);
    }
  hb_collection_stats st = HB_COLLECTION_STATS_INIT;
  CHECK_OK(hb_collection_get_stats(m.coll, &st));
  CHECK(st.updates == static_cast<uint64_t>(s) + 4, "%llu updates counted",
        (unsigned long long)st.updates);
}

// One batch's outputs as the C API takes them.
struct Outputs {
  std::vector<float> out;
  std::vector<std::vector<float>> unp;
  std::vector<float *> up;
  std::vector<const float *> gup;
  Outputs(hb_collection *coll, const CollCase &c, JBatch &b) {
    out.assign(b.B * hbtest::coll_width(c), -7.0f);
    unp.resize(c.features.size());
    for (size_t f = 0; f < c.features.size(); ++f) {
      unp[f].assign(b.n(f) * hb_collection_feature_dim(coll, f), -7.0f);
      up.push_back(unp[f].data());
      gup.push_back(b.grad_unpooled[f].data());
    }
  }
  // Bit-equal to the reference's lookup of b now.
  void check(CollRef &ref, const JBatch &b, int s) const {
    std::vector<float> want;
    std::vector<std::vector<float>> want_unp;
    ref.lookup(b, &want, &want_unp);
    CHECK(out.empty() || !std::memcmp(out.data(), want.data(), out.size() * 4),
          "step %d: pooled output differs", s);
    for (size_t f = 0; f < unp.size(); ++f)
      CHECK(ref.c.features[f].pooling != HB_POOLING_NONE || unp[f].empty() ||
                !std::memcmp(unp[f].data(), want_unp[f].data(),
                             unp[f].size() * 4),
            "step %d: unpooled output of feature %zu differs", s, f);
  }
};

// A call in which every rank is expected to fail with `want` at once.
void expect_all_fail(hb_status st, hb_status want, const char *what,
                     const char *text) {
  CHECK(st == want, "%s: got %s: %s", what, hb_status_name(st),
        hb_last_error());
  CHECK(std::strstr(hb_last_error(), text), "%s: message '%s' lacks '%s'", what,
        hb_last_error(), text);
}

void mode_pipeline(hb_context *ctx) {
  CollCase c = hbtest::standard_case();
  CollRef ref(c);
  Model m(ctx, c);
  std::mt19937_64 g(123);
  const int kSteps = 8;
  // Every rank's batches of every step (the reference needs them all).
  std::vector<std::vector<JBatch>> all;
  for (int s = 0; s <= kSteps; ++s)
    all.push_back(hbtest::make_step(g, c, g_world));
  // Step 3 updates other ids than it looked up (it plans again, with the
  // next lookup pending); the reference updates the same ones.
  std::vector<JBatch> shifted = all[3];
  for (JBatch &b : shifted) hbtest::shift_ids(b, c);
  std::vector<std::unique_ptr<Outputs>> outs;
  for (int s = 0; s <= kSteps; ++s)
    outs.emplace_back(new Outputs(m.coll, c, all[s][g_rank]));
  std::vector<hb_jagged_batch> views;
  for (int s = 0; s <= kSteps; ++s) views.push_back(all[s][g_rank].view());
  hb_jagged_batch shifted_view = shifted[g_rank].view();
  auto start = [&](int s) {
    return hb_collection_lookup_start(m.coll, &views[s], outs[s]->out.data(),
                                      outs[s]->up.data());
  };
  auto apply = [&](int s) {
    const hb_jagged_batch *v = s == 3 ? &shifted_view : &views[s];
    return hb_collection_apply_gradients(
        m.coll, v, all[s][g_rank].grad_out.data(), outs[s]->gup.data());
  };
  // Misuse: a wait with nothing started (no exchange: every rank fails).
  expect_all_fail(hb_collection_lookup_wait(m.coll), HB_ERR_INVALID_ARGUMENT,
                  "wait before start", "no lookup was started");
  CHECK_OK(start(0));
  for (int s = 0; s < kSteps; ++s) {
    CHECK_OK(hb_collection_lookup_wait(m.coll));
    outs[s]->check(ref, all[s][g_rank], s);
    if (s == 2) {
      // One rank's bad batch fails the start on every rank at once;
      // nothing is pending after it.
      const int bad = 1 % g_world;
      hb_jagged_batch small = views[s + 1];
      small.struct_size = 4;
      hb_status st = hb_collection_lookup_start(
          m.coll, g_rank == bad ? &small : &views[s + 1],
          outs[s + 1]->out.data(), outs[s + 1]->up.data());
      // The bad rank fails at once; a good one whose start posted its
      // rounds to the progress thread (option cpu_async_exchange) learns
      // it at its wait.
      if (st == HB_OK && g_rank != bad) st = hb_collection_lookup_wait(m.coll);
      expect_all_fail(st, HB_ERR_INVALID_ARGUMENT, "bad start",
                      g_rank == bad ? "is too small" : "failed with");
      expect_all_fail(hb_collection_lookup_wait(m.coll),
                      HB_ERR_INVALID_ARGUMENT, "wait after a failed start",
                      "no lookup was started");
    }
    CHECK_OK(start(s + 1));
    if (s == 4) {
      // With a lookup pending: another start or a lookup fails on every
      // rank (the started lookup stays pending and finishes below).
      expect_all_fail(start(s + 1), HB_ERR_INVALID_ARGUMENT, "second start",
                      "is pending");
      expect_all_fail(
          hb_collection_lookup(m.coll, &views[s], outs[s]->out.data(),
                               outs[s]->up.data()),
          HB_ERR_INVALID_ARGUMENT, "lookup while pending", "is pending");
    }
    // The update of step s between the start of step s + 1 and its wait:
    // the wait must see it.
    CHECK_OK(apply(s));
    ref.apply(s == 3 ? shifted : all[s]);
  }
  CHECK_OK(hb_collection_lookup_wait(m.coll));
  outs[kSteps]->check(ref, all[kSteps][g_rank], kSteps);
  hb_collection_stats st = HB_COLLECTION_STATS_INIT;
  CHECK_OK(hb_collection_get_stats(m.coll, &st));
  // Rounds: per lookup header and ids (h: one round or two) and rows, 1
  // per update that reuses its plan, 1 + h + 1 for the shifted one
  // (verdict, header and ids, partial sums) and 1 header per failed start
  // or lookup (step 2's, step 4's two); the misused waits exchange
  // nothing.
  const uint64_t lookups = kSteps + 1, updates = kSteps;
  const uint64_t h = header_ids_rounds(ctx);
  CHECK(st.reused_plans == updates - 1, "%llu plans reused",
        (unsigned long long)st.reused_plans);
  CHECK(st.rounds == (h + 1) * lookups + (updates - 1) + (h + 2) + 3,
        "%llu rounds for %llu lookups and %llu updates",
        (unsigned long long)st.rounds, (unsigned long long)lookups,
        (unsigned long long)updates);
}

double now_ms() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

void mode_async(hb_context *&ctx) {
  CollCase c = hbtest::standard_case();
  CollRef ref(c);
  auto *m = new Model(ctx, c);
  std::mt19937_64 g(321);
  const int kSteps = 4;
  std::vector<std::vector<JBatch>> all;
  for (int s = 0; s <= kSteps + 1; ++s)
    all.push_back(hbtest::make_step(g, c, g_world));
  std::vector<std::unique_ptr<Outputs>> outs;
  for (int s = 0; s <= kSteps + 1; ++s)
    outs.emplace_back(new Outputs(m->coll, c, all[s][g_rank]));
  std::vector<hb_jagged_batch> views;
  for (int s = 0; s <= kSteps + 1; ++s) views.push_back(all[s][g_rank].view());
  auto start = [&](hb_collection *coll, int s) {
    return hb_collection_lookup_start(coll, &views[s], outs[s]->out.data(),
                                      outs[s]->up.data());
  };
  CHECK_OK(start(m->coll, 0));
  for (int s = 0; s < kSteps; ++s) {
    CHECK_OK(hb_collection_lookup_wait(m->coll));
    outs[s]->check(ref, all[s][g_rank], s);
    // Step 1: the other ranks start 300 ms late. Rank 0's start must not
    // wait for them (its rounds run on the progress thread), and the
    // allreduce it makes meanwhile runs on the context's own communicator.
    const bool late = s == 1 && g_world > 1;
    if (late && g_rank != 0) usleep(300 * 1000);
    const double t0 = now_ms();
    CHECK_OK(start(m->coll, s + 1));
    const double took = now_ms() - t0;
    if (late && g_rank == 0) {
      CHECK(took < 150, "the start waited %.0f ms for its late peers", took);
      float x = 1, y = 0;
      CHECK_OK(hb_allreduce(ctx, &x, &y, 1, HB_FLOAT32, HB_SUM));
      CHECK(y == float(g_world), "allreduce beside the start: %g", double(y));
    } else if (late) {
      float x = 1, y = 0;
      CHECK_OK(hb_allreduce(ctx, &x, &y, 1, HB_FLOAT32, HB_SUM));
    }
    CHECK_OK(hb_collection_apply_gradients(m->coll, &views[s],
                                           all[s][g_rank].grad_out.data(),
                                           outs[s]->gup.data()));
    ref.apply(all[s]);
  }
  // A collection destroyed with a start in flight: its rounds end on every
  // rank (the peers' progress threads run their halves), so a second
  // collection over the same tables works at once.
  hb_collection_destroy(m->coll);
  std::vector<hb_collection_feature> fs = feature_list(c, m->tables);
  CHECK_OK(hb_collection_create(ctx, fs.data(), fs.size(), &m->coll));
  CHECK_OK(hb_collection_lookup(m->coll, &views[kSteps],
                                outs[kSteps]->out.data(),
                                outs[kSteps]->up.data()));
  outs[kSteps]->check(ref, all[kSteps][g_rank], kSteps);
  // A mismatched call still fails everywhere: rank 0 starts (its rounds on
  // the progress thread; it learns at its wait), the others look up.
  hb_status st = g_rank == 0 ? start(m->coll, kSteps)
                             : hb_collection_lookup(m->coll, &views[kSteps],
                                                    outs[kSteps]->out.data(),
                                                    outs[kSteps]->up.data());
  if (g_rank == 0 && st == HB_OK) st = hb_collection_lookup_wait(m->coll);
  expect_all_fail(st, HB_ERR_MISMATCH, "start against a lookup",
                  "made a different call");
  // The context destroyed with a start in flight, then the collection and
  // its tables (as after a failure): no hang, nothing used after free.
  CHECK_OK(start(m->coll, kSteps + 1));
  hb_context_destroy(ctx);
  ctx = nullptr;
  delete m;
}

// A *peer mode's victim: leaves after ms, without a word (no BYE).
[[noreturn]] void die_after_ms(int ms) {
  usleep(ms * 1000);
  std::fflush(stdout);
  _exit(0);
}

// A survivor's call that waited on the victim (started at t0): it fails
// with HB_ERR_PEER_FAILED, from liveness well inside the timeout.
void expect_peer_failed(hb_status st, double t0, int victim, const char *call) {
  const double took = now_ms() - t0;
  CHECK(st == HB_ERR_PEER_FAILED, "%s after rank %d died: %s: %s", call, victim,
        hb_status_name(st), hb_last_error());
  CHECK(took < kBadTimeoutMs / 4.0, "%s: the error took %.0f ms", call, took);
  std::printf("rank %d: %s failed after %.0f ms: %s\n", g_rank, call, took,
              hb_last_error());
}

void mode_async_peer(hb_context *ctx) {
  CollCase c = hbtest::standard_case();
  Model m(ctx, c);
  std::mt19937_64 g(77);
  std::vector<JBatch> all = hbtest::make_step(g, c, g_world);
  JBatch &b = all[g_rank];
  Outputs out(m.coll, c, b);
  hb_jagged_batch v = b.view();
  CHECK_OK(hb_collection_lookup(m.coll, &v, out.out.data(), out.up.data()));
  CHECK_OK(hb_context_barrier(ctx, 0));
  const int victim = g_world - 1;
  if (g_rank == victim) die_after_ms(400);  // the others' starts in flight
  CHECK_OK(
      hb_collection_lookup_start(m.coll, &v, out.out.data(), out.up.data()));
  const double t0 = now_ms();
  expect_peer_failed(hb_collection_lookup_wait(m.coll), t0, victim, "wait");
  // Nothing pending any more; destroying everything is clean (Model).
}

// Rank r's dense gradients of step s: values whose sum depends on the
// order (1, 1e8, -1e8 on ranks 0, 1, 2: (1 + 1e8) - 1e8 is 0 in float32,
// 1 + (1e8 - 1e8) and the reverse order give 1) and mixed magnitudes and
// signs.
std::vector<float> dense_input(int r, int s, size_t n) {
  std::mt19937_64 g(1000003ull * s + r);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    const float e = std::ldexp(1.0f, static_cast<int>(g() % 60) - 30);
    x[i] = i % 4 == 0 ? u(g) * e : u(g);
  }
  const float first[] = {1.0f, 1e8f, -1e8f, 3.0f};
  if (n) x[0] = first[r % 4];
  return x;
}

// The dense sum of one step against hb_allreduce of the same inputs; every
// rank computes the whole reference sum too (rank order, float32).
void check_dense_sum(hb_context *ctx, const std::vector<float> &got, int s) {
  const size_t n = got.size();
  std::vector<float> want = dense_input(g_rank, s, n);
  CHECK_OK(hb_allreduce(ctx, want.data(), want.data(), n, HB_FLOAT32, HB_SUM));
  CHECK(!std::memcmp(got.data(), want.data(), n * 4),
        "step %d: the dense sum differs from hb_allreduce's", s);
  std::vector<float> ref = dense_input(0, s, n);
  for (int r = 1; r < g_world; ++r) {
    std::vector<float> x = dense_input(r, s, n);
    for (size_t i = 0; i < n; ++i) ref[i] += x[i];
  }
  CHECK(!std::memcmp(got.data(), ref.data(), n * 4),
        "step %d: the dense sum differs from the rank-order sum", s);
  if (g_world == 3)
    CHECK(got[0] == 0.0f, "step %d: (1 + 1e8) - 1e8 summed to %g", s, got[0]);
}

// The dense modes' model, reference and batches.
struct DenseCase {
  CollCase c = hbtest::standard_case();
  CollRef ref{c};
  Model m;
  std::mt19937_64 g;
  DenseCase(hb_context *ctx, uint64_t seed) : m(ctx, c), g(seed) {}
};

// One step's batches and this rank's outputs; lookup() checks them against
// the reference.
struct DenseStep {
  std::vector<JBatch> all;
  Outputs o;
  hb_jagged_batch v;
  explicit DenseStep(DenseCase &k)
      : all(hbtest::make_step(k.g, k.c, g_world)),
        o(k.m.coll, k.c, all[g_rank]),
        v(all[g_rank].view()) {}
  void lookup(DenseCase &k, int s) {
    CHECK_OK(hb_collection_lookup(k.m.coll, &v, o.out.data(), o.up.data()));
    o.check(k.ref, all[g_rank], s);
  }
  const float *grad_out() const { return all[g_rank].grad_out.data(); }
};

hb_collection_stats coll_stats(hb_collection *c) {
  hb_collection_stats st = HB_COLLECTION_STATS_INIT;
  CHECK_OK(hb_collection_get_stats(c, &st));
  return st;
}

// hb_collection_apply_gradients_dense: the tables as the reference's, the
// dense sum as hb_allreduce's, in place and not, when the step reuses its
// lookup's plan (one round, the dense floats in it) and when it plans again
// (its ids differ from the lookup's, or no lookup came before it).
void mode_dense(hb_context *ctx) {
  DenseCase k(ctx, 31);
  const size_t kN = 5000;
  for (int s = 0; s < 6; ++s) {
    DenseStep st(k);
    const int plan = s % 3;  // 0: reuse, 1: other ids, 2: no lookup
    if (plan != 2) st.lookup(k, s);
    std::vector<JBatch> upd = st.all;
    if (plan == 1)
      for (JBatch &b : upd) hbtest::shift_ids(b, k.c);
    hb_jagged_batch uv = upd[g_rank].view();
    std::vector<float> x = dense_input(g_rank, s, kN), y(kN, -7.0f);
    hb_collection_dense d = HB_COLLECTION_DENSE_INIT;
    d.send = x.data();
    d.recv = s % 2 ? x.data() : y.data();  // in place on odd steps
    d.count = kN;
    const hb_collection_stats before = coll_stats(k.m.coll);
    CHECK_OK(hb_collection_apply_gradients_dense(
        k.m.coll, &uv, upd[g_rank].grad_out.data(), st.o.gup.data(), &d));
    const hb_collection_stats after = coll_stats(k.m.coll);
    k.ref.apply(upd);
    const uint64_t rounds = after.rounds - before.rounds;
    // reuse: 1; other ids: the refused round + header and ids (h: one
    // round or two) + partials; no lookup: header and ids + partials. No
    // round of its own for the sum.
    const uint64_t h = header_ids_rounds(ctx);
    const uint64_t want = g_world == 1 ? rounds
                          : plan == 0  ? 1
                          : plan == 1  ? h + 2
                                       : h + 1;
    CHECK(rounds == want, "step %d (plan %d): %llu rounds, %llu expected", s,
          plan, (unsigned long long)rounds, (unsigned long long)want);
    check_dense_sum(ctx, s % 2 ? x : y, s);
  }
  // count 0 and a NULL dense: the plain update.
  DenseStep st(k);
  hb_collection_dense none = HB_COLLECTION_DENSE_INIT;
  st.lookup(k, 90);
  CHECK_OK(hb_collection_apply_gradients_dense(k.m.coll, &st.v, st.grad_out(),
                                               st.o.gup.data(), &none));
  CHECK_OK(hb_collection_apply_gradients_dense(k.m.coll, &st.v, st.grad_out(),
                                               st.o.gup.data(), nullptr));
  k.ref.apply(st.all);
  k.ref.apply(st.all);
  st.lookup(k, 91);
}

// Ranks that pass different dense counts (one passes none) all fail with
// HB_ERR_MISMATCH, a bad buffer on one rank fails every rank with
// HB_ERR_INVALID_ARGUMENT naming it; neither changes the tables or recv,
// and the next matched step is bit-equal.
void mode_dense_mismatch(hb_context *ctx) {
  DenseCase k(ctx, 32);
  const size_t kN = 300;
  const int odd = g_world - 1;
  for (int s = 0; s < 5; ++s) {
    DenseStep st(k);
    st.lookup(k, s);  // after a failed step: the tables as they were
    // One float more than kN: the odd rank's count of kN + 1 reads it.
    std::vector<float> x = dense_input(g_rank, s, kN + 1), y(kN + 1, -7.0f);
    hb_collection_dense d = HB_COLLECTION_DENSE_INIT;
    d.send = x.data(), d.recv = y.data(), d.count = kN;
    hb_collection_dense bad = d;
    const hb_collection_dense *pass = &d;
    if (g_rank == odd) {
      if (s == 0) pass = nullptr;                    // no dense buffer
      if (s == 1) bad.count = kN + 1, pass = &bad;   // another count
      if (s == 2) bad.send = nullptr, pass = &bad;   // a NULL send
      if (s == 3) bad.struct_size = 8, pass = &bad;  // too small a struct
    }
    hb_status r = hb_collection_apply_gradients_dense(
        k.m.coll, &st.v, st.grad_out(), st.o.gup.data(), pass);
    if (s == 4) {
      CHECK_OK(r);
      k.ref.apply(st.all);
      CHECK(y[kN] == -7.0f, "a float past the count was written");
      y.pop_back();
      check_dense_sum(ctx, y, s);
      break;
    }
    if (s == 2)
      expect_all_fail(r, HB_ERR_INVALID_ARGUMENT, "dense NULL send",
                      g_rank == odd ? "dense->send is NULL" : "failed with");
    else if (s == 3 && g_rank == odd)
      // A struct too small counts as no buffer (0 floats): the sizes
      // differ, so the round's check may fail this rank first.
      CHECK(r == HB_ERR_MISMATCH || r == HB_ERR_INVALID_ARGUMENT,
            "step 3: got %s: %s", hb_status_name(r), hb_last_error());
    else
      expect_all_fail(r, HB_ERR_MISMATCH, "dense mismatch", "dense count");
    for (float f : y) CHECK(f == -7.0f, "step %d: recv changed", s);
  }
}

// The last rank dies before the update: the others' update fails with
// HB_ERR_PEER_FAILED, not a hang.
void mode_dense_peer(hb_context *ctx) {
  DenseCase k(ctx, 33);
  DenseStep st(k);
  st.lookup(k, 0);
  CHECK_OK(hb_context_barrier(ctx, 0));
  const int victim = g_world - 1;
  if (g_rank == victim) {
    // Not at once: a rank still leaving the barrier would see the death
    // there (HB_ERR_PEER_FAILED from the barrier, not the update).
    die_after_ms(300);
  }
  std::vector<float> x = dense_input(g_rank, 0, 1000);
  hb_collection_dense d = HB_COLLECTION_DENSE_INIT;
  d.send = d.recv = x.data(), d.count = x.size();
  const double t0 = now_ms();
  expect_peer_failed(hb_collection_apply_gradients_dense(
                         k.m.coll, &st.v, st.grad_out(), st.o.gup.data(), &d),
                     t0, victim, "update");
}

}  // namespace

void mode_rounds(hb_context *ctx) {
  CollCase c = hbtest::standard_case();
  CollRef ref(c);
  Model m(ctx, c);
  // With cpu_async_exchange=0 the collection's rounds run on the context's
  // communicator: its board posts are the collection's (one per round).
  hb::comm::Backend &comm = hb::comm::cpu_backend(hb::ctx_ref(ctx));
  CHECK(g_world == 1 || comm.sized_in_one_round(),
        "this test needs the call board (one host, calls checked)");
  auto posts = [&] { return comm.traffic().shm_messages; };
  const uint64_t one = g_world > 1 ? 1 : 0;  // world 1 posts nothing
  std::mt19937_64 g(31);
  int s = 0;
  auto expect_posts = [&](uint64_t before, const char *call) {
    const uint64_t got = posts() - before;
    CHECK(got == one, "step %d, %s: %llu board posts, want %llu", s, call,
          (unsigned long long)got, (unsigned long long)one);
  };
  auto good_step = [&](std::vector<JBatch> &all) {
    JBatch &b = all[g_rank];
    Outputs o(m.coll, c, b);
    hb_jagged_batch v = b.view();
    uint64_t at = posts();
    CHECK_OK(hb_collection_lookup_start(m.coll, &v, o.out.data(), o.up.data()));
    expect_posts(at, "lookup_start (header and ids)");
    at = posts();
    CHECK_OK(hb_collection_lookup_wait(m.coll));
    expect_posts(at, "lookup_wait (rows)");
    o.check(ref, b, s);
    ref.apply(all);
    at = posts();
    CHECK_OK(hb_collection_apply_gradients(m.coll, &v, b.grad_out.data(),
                                           o.gup.data()));
    expect_posts(at, "apply_gradients (partial sums)");
    ++s;
  };
  for (int k = 0; k < 3; ++k) {
    std::vector<JBatch> all = hbtest::make_step(g, c, g_world);
    good_step(all);
  }
  // The last rank plans an id out of range: every rank fails in the folded
  // round at once, the others naming it; nothing changes.
  // (A step whose batch on that rank has ids: some steps' are empty.)
  const int who = g_world - 1;
  std::vector<JBatch> all;
  size_t f = 0;
  for (;;) {
    all = hbtest::make_step(g, c, g_world);
    for (f = 0; f < c.features.size() && all[who].n(f) == 0;) ++f;
    if (f < c.features.size()) break;
  }
  JBatch bad = all[g_rank];
  if (g_rank == who) bad.ids[f][bad.base[f]] = -5;
  Outputs o(m.coll, c, bad);
  hb_jagged_batch v = bad.view();
  const uint64_t at = posts();
  const double t0 = now_s();
  hb_status st =
      hb_collection_lookup_start(m.coll, &v, o.out.data(), o.up.data());
  CHECK(now_s() - t0 < kBadTimeoutMs / 4000.0, "the error took %.1f s",
        now_s() - t0);
  expect_posts(at, "lookup_start with a bad id");
  char want[96];
  if (g_rank == who)
    std::snprintf(want, sizeof want, "id -5 outside");
  else
    std::snprintf(want, sizeof want,
                  "rank %d failed with HB_ERR_INVALID_ARGUMENT (id -5)", who);
  expect_all_fail(st, HB_ERR_INVALID_ARGUMENT, "bad id", want);
  good_step(all);
  // Rank 0 updates reusing its lookup's plan (the partial sums' alltoallv)
  // while the others look up (header and ids, sizes with the data): the
  // board's call check fails every rank with HB_ERR_MISMATCH before any
  // row moves; then matched steps work, bit-equal.
  all = hbtest::make_step(g, c, g_world);
  {
    JBatch &b = all[g_rank];
    Outputs o(m.coll, c, b);
    hb_jagged_batch v = b.view();
    CHECK_OK(hb_collection_lookup(m.coll, &v, o.out.data(), o.up.data()));
    st = g_rank == 0
             ? hb_collection_apply_gradients(m.coll, &v, b.grad_out.data(),
                                             o.gup.data())
             : hb_collection_lookup(m.coll, &v, o.out.data(), o.up.data());
    expect_all_fail(st, HB_ERR_MISMATCH, "update vs lookup",
                    "mismatched collective calls");
  }
  good_step(all);
}

namespace {

// Small and realistic tables: the demo's widths (8; 1, its wide table),
// a dynamic one, and an odd-width float16 table first, so the float32
// rows behind it in a peer's rows block are unaligned whenever it sends
// an odd count of rows.
CollCase realistic_case() {
  using hbtest::coll_table;
  return hbtest::make_case(
      {coll_table("h3", 3, 64, HB_OPT_SGD, HB_PARTITION_MOD, HB_FLOAT16),
       coll_table("e8", 8, 2048, HB_OPT_ADAGRAD, HB_PARTITION_MOD, HB_FLOAT32),
       coll_table("w1", 1, 4096, HB_OPT_ADAGRAD, HB_PARTITION_DIV, HB_FLOAT32),
       coll_table("d4", 4, 0, HB_OPT_SGD, HB_PARTITION_MOD, HB_FLOAT32)},
      {{0, HB_POOLING_SUM, false, 1, true},
       {1, HB_POOLING_SUM, false, 1, true},
       {2, HB_POOLING_SUM, false, 1, true},
       {3, HB_POOLING_MEAN, true, 3, false},
       {1, HB_POOLING_NONE, false, 2, false}});
}

std::vector<JBatch> realistic_step(std::mt19937_64 &g, const CollCase &c) {
  std::vector<JBatch> all;
  for (int r = 0; r < g_world; ++r)
    all.push_back(hbtest::make_jbatch(g, c, 40 + 9 * r, 300));
  return all;
}

void mode_realistic(hb_context *ctx) {
  CollCase c = realistic_case();
  CollRef ref(c);
  Model m(ctx, c);
  // The same tables in a world of one (no network): its lookups pool from
  // the shard's records, the world-N ones from the exchanged rows.
  hb_context_options o1 = HB_CONTEXT_OPTIONS_INIT;
  o1.rank = 0;
  o1.world_size = 1;
  o1.local_rank = 0;
  o1.local_world_size = 1;
  hb_context *ctx1 = nullptr;
  CHECK_OK(hb_context_create(&o1, &ctx1));
  {
    Model m1(ctx1, c);
    std::mt19937_64 g(91);
    for (int s = 0; s < 3; ++s) {
      std::vector<JBatch> all = realistic_step(g, c);
      JBatch &b = all[g_rank];
      Outputs got(m.coll, c, b), want(m1.coll, c, b);
      hb_jagged_batch v = b.view();
      CHECK_OK(hb_collection_lookup(m.coll, &v, got.out.data(), got.up.data()));
      CHECK_OK(
          hb_collection_lookup(m1.coll, &v, want.out.data(), want.up.data()));
      auto same = [](const std::vector<float> &x, const std::vector<float> &y) {
        return x.size() == y.size() &&
               (x.empty() || !std::memcmp(x.data(), y.data(), x.size() * 4));
      };
      CHECK(same(got.out, want.out),
            "lookup %d: pooled output differs from the world-1 lookup's", s);
      for (size_t f = 0; f < got.unp.size(); ++f)
        CHECK(same(got.unp[f], want.unp[f]),
              "lookup %d: feature %zu's unpooled output differs from the "
              "world-1 lookup's",
              s, f);
    }
  }
  hb_context_destroy(ctx1);
  // Training: every lookup bit-equal to the reference's after the updates.
  std::mt19937_64 g(92);
  for (int s = 0; s < 4; ++s) {
    std::vector<JBatch> all = realistic_step(g, c);
    step(m, ref, all, s);
  }
  // The last rank leaves right after a lookup; the others' outputs hold
  // its rows, then their next call fails.
  std::vector<JBatch> all = realistic_step(g, c);
  JBatch &b = all[g_rank];
  Outputs out(m.coll, c, b);
  hb_jagged_batch v = b.view();
  CHECK_OK(hb_collection_lookup(m.coll, &v, out.out.data(), out.up.data()));
  const int victim = g_world - 1;
  if (g_rank == victim) {
    // Not at once: the others may still be in the rows round's wait.
    die_after_ms(200);
  }
  out.check(ref, b, 4);
  const double t0 = now_ms();
  expect_peer_failed(hb_collection_apply_gradients(
                         m.coll, &v, b.grad_out.data(), out.gup.data()),
                     t0, victim, "update");
}

}  // namespace

int main(int argc, char **argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  hb_context *ctx = nullptr;
  hb_context_options opts = HB_CONTEXT_OPTIONS_INIT;
  std::string options = "timeout_ms=" + std::to_string(kBadTimeoutMs);
  if (mode == "badbatch" || mode == "pipeline" || mode == "async" ||
      mode == "densemismatch" || mode == "densepeer" || mode == "rounds" ||
      mode == "realistic")
    opts.options = options.c_str();
  CHECK_OK(hb_context_create(&opts, &ctx));
  g_rank = g_mp_rank = hb_context_rank(ctx);
  g_world = hb_context_world_size(ctx);
  if (mode == "train")
    mode_train(ctx, argc > 2 ? argv[2] : "mp_coll_ckpt");
  else if (mode == "mismatch")
    mode_mismatch(ctx);
  else if (mode == "badbatch")
    mode_bad_batch(ctx);
  else if (mode == "pipeline")
    mode_pipeline(ctx);
  else if (mode == "async")
    mode_async(ctx);
  else if (mode == "asyncpeer")
    mode_async_peer(ctx);
  else if (mode == "dense")
    mode_dense(ctx);
  else if (mode == "densemismatch")
    mode_dense_mismatch(ctx);
  else if (mode == "densepeer")
    mode_dense_peer(ctx);
  else if (mode == "rounds")
    mode_rounds(ctx);
  else if (mode == "realistic")
    mode_realistic(ctx);
  else
    CHECK(false, "unknown mode '%s'", mode.c_str());
  hb_context_destroy(ctx);
  std::printf("rank %d/%d: mp_collection %s passed\n", g_rank, g_world,
              mode.c_str());
  return 0;
}
