// One rank of the multi-process metric test (hb_add_mp_test at 2, 3, 4
// ranks). Every rank builds the same data set, keeps an uneven share of it
// (the last rank of 3+ keeps nothing), and checks that hb_metric_result on
// the context equals, bit for bit, a local metric fed the whole data set.
// Exits 0 when every check on this rank passed.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/mp_check.h"
#include "hb.h"
#include "metrics/reference.h"

int g_mp_rank = -1;
const char *g_mp_name = "mp_metrics";

namespace {

void feed(hb_metric *m, const hb_metric_config &c, const ref::Data &d,
          const std::vector<size_t> &idx) {
  ref::Data mine;
  for (size_t i : idx) {
    mine.labels.push_back(d.labels[i]);
    mine.preds.push_back(d.preds[i]);
    if (!d.weights.empty()) mine.weights.push_back(d.weights[i]);
    mine.groups.push_back(d.groups[i]);
  }
  for (size_t at = 0; at < mine.size(); at += 500) {
    size_t n = std::min<size_t>(500, mine.size() - at);
    const float *w = mine.weights.empty() ? nullptr : mine.weights.data() + at;
    if (c.kind == HB_METRIC_GAUC)
      CHECK_OK(hb_metric_update_grouped(m, mine.labels.data() + at,
                                        mine.preds.data() + at, w,
                                        mine.groups.data() + at, n));
    else
      CHECK_OK(hb_metric_update(m, mine.labels.data() + at,
                                mine.preds.data() + at, w, n));
  }
}

}  // namespace

int main() {
  hb_context *ctx = nullptr;
  CHECK_OK(hb_context_create(nullptr, &ctx));
  g_mp_rank = hb_context_rank(ctx);
  const int world = hb_context_world_size(ctx);

  std::vector<hb_metric_config> configs;
  for (int kind = HB_METRIC_ACCURACY; kind <= HB_METRIC_GAUC; ++kind) {
    hb_metric_config c = HB_METRIC_CONFIG_INIT;
    c.kind = kind;
    configs.push_back(c);
  }
  hb_metric_config pr = HB_METRIC_CONFIG_INIT;
  pr.curve = HB_CURVE_PR;
  pr.summation = HB_SUMMATION_CAREFUL_INTERPOLATION;
  configs.push_back(pr);
  hb_metric_config binned = HB_METRIC_CONFIG_INIT;
  binned.kind = HB_METRIC_AUC_EXACT;
  binned.bins = 1000;
  configs.push_back(binned);
  hb_metric_config clicks = HB_METRIC_CONFIG_INIT;
  clicks.kind = HB_METRIC_GAUC;
  clicks.gauc_weighting = HB_GAUC_CLICKS;
  configs.push_back(clicks);

  for (bool weighted : {false, true}) {
    ref::Data d = ref::random_data(20000, 77 + weighted, weighted, 500, 300);
    for (size_t i = 0; i < d.size(); i += 4)
      d.preds[i] = d.labels[i];  // accuracy hits
    // Uneven split: sample i goes to rank (i * 7919 mod 10) mod parts,
    // where the last rank of 3+ gets nothing.
    int parts = world >= 3 ? world - 1 : world;
    std::vector<size_t> mine;
    for (size_t i = 0; i < d.size(); ++i) {
      int owner = static_cast<int>((i * 7919 % 10 + i % 3) % parts);
      if (owner == g_mp_rank) mine.push_back(i);
    }
    std::vector<size_t> all(d.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;

    for (const hb_metric_config &c : configs) {
      hb_metric *dist = nullptr, *local = nullptr;
      CHECK_OK(hb_metric_create(ctx, &c, &dist));
      CHECK_OK(hb_metric_create(nullptr, &c, &local));
      feed(dist, c, d, mine);
      feed(local, c, d, all);
      double a = -1, b = -2;
      CHECK_OK(hb_metric_result(dist, &a));
      CHECK_OK(hb_metric_result(local, &b));
      CHECK(std::memcmp(&a, &b, sizeof a) == 0,
            "kind %d weighted %d: distributed %.17g != local %.17g", c.kind,
            weighted, a, b);
      CHECK(hb_metric_flags(dist) == hb_metric_flags(local),
            "kind %d: flags %d vs %d", c.kind, hb_metric_flags(dist),
            hb_metric_flags(local));
      // Streaming goes on after a result: the local state is untouched.
      feed(dist, c, d, mine);
      feed(local, c, d, all);
      CHECK_OK(hb_metric_result(dist, &a));
      CHECK_OK(hb_metric_result(local, &b));
      CHECK(std::memcmp(&a, &b, sizeof a) == 0,
            "kind %d second result: %.17g != %.17g", c.kind, a, b);
      hb_metric_destroy(dist);
      hb_metric_destroy(local);
    }
  }

  // Ranks that disagree on the config all get HB_ERR_MISMATCH naming the
  // odd rank, the field and every rank's value, and nobody hangs.
  hb_metric_config c = HB_METRIC_CONFIG_INIT;
  c.num_thresholds = g_mp_rank == world - 1 ? 100 : 200;
  hb_metric *m = nullptr;
  CHECK_OK(hb_metric_create(ctx, &c, &m));
  double out;
  std::string odd = "rank " + std::to_string(world - 1) + " differs";
  auto expect_mismatch = [&](hb_status st, const char *what,
                             std::vector<std::string> needles) {
    CHECK(st == HB_ERR_MISMATCH, "%s gave %s: %s", what, hb_status_name(st),
          hb_last_error());
    needles.push_back(odd);
    needles.push_back("hb_metric_result");
    for (const std::string &n : needles)
      CHECK(std::strstr(hb_last_error(), n.c_str()),
            "%s: message lacks '%s': %s", what, n.c_str(), hb_last_error());
    CHECK(!std::strstr(hb_last_error(), "config "),
          "%s: message names a fingerprint: %s", what, hb_last_error());
  };
  // "ranks 0,1" at world 3, "rank 0" at world 2.
  std::string others = world == 2 ? "rank 0" : "ranks 0";
  std::string last = "rank " + std::to_string(world - 1);
  expect_mismatch(hb_metric_result(m, &out), "config mismatch",
                  {"num_thresholds: 200 (" + others, "100 (" + last + ")"});
  hb_metric_destroy(m);
  // Several fields at once, with symbolic values.
  hb_metric_config g = HB_METRIC_CONFIG_INIT, h = HB_METRIC_CONFIG_INIT;
  g.kind = h.kind = HB_METRIC_GAUC;
  h.gauc_weighting = HB_GAUC_CLICKS;
  hb_metric_config a = HB_METRIC_CONFIG_INIT;
  a.kind = HB_METRIC_ACCURACY;
  a.threshold = 0.25;
  CHECK_OK(hb_metric_create(ctx, g_mp_rank == world - 1 ? &h : &g, &m));
  expect_mismatch(hb_metric_result(m, &out), "gauc_weighting mismatch",
                  {"gauc_weighting: HB_GAUC_UNWEIGHTED (" + others,
                   "HB_GAUC_CLICKS (" + last + ")"});
  hb_metric_destroy(m);
  CHECK_OK(hb_metric_create(ctx, g_mp_rank == world - 1 ? &a : &g, &m));
  expect_mismatch(
      hb_metric_result(m, &out), "kind and threshold mismatch",
      {"kind: HB_METRIC_GAUC (" + others, "HB_METRIC_ACCURACY (" + last + ")",
       "threshold: -1 (" + others, "0.25 (" + last + ")"});
  hb_metric_destroy(m);
  // Two metrics with one config: merging different ones is caught by their
  // merge sequence; a kind mismatch by the kind. Matched merges then work.
  hb_metric_config auc = HB_METRIC_CONFIG_INIT, acc = HB_METRIC_CONFIG_INIT;
  acc.kind = HB_METRIC_ACCURACY;
  hb_metric *x = nullptr, *y = nullptr, *z = nullptr;
  CHECK_OK(hb_metric_create(ctx, &auc, &x));
  CHECK_OK(hb_metric_create(ctx, &auc, &y));
  CHECK_OK(hb_metric_create(ctx, &acc, &z));
  float label = 1, pred = 0.75f;
  CHECK_OK(hb_metric_update(x, &label, &pred, nullptr, 1));
  CHECK_OK(hb_metric_result(x, &out));
  const bool last_rank = g_mp_rank == world - 1;
  expect_mismatch(hb_metric_result(last_rank ? y : x, &out),
                  "sequence mismatch", {"merge 1", "merge 0"});
  expect_mismatch(hb_metric_result(last_rank ? z : x, &out), "kind mismatch",
                  {"kind: HB_METRIC_AUC (", "HB_METRIC_ACCURACY (" + last});
  CHECK_OK(hb_metric_result(x, &out));
  CHECK_OK(hb_metric_result(z, &out));
  hb_metric_destroy(x);
  hb_metric_destroy(y);
  hb_metric_destroy(z);

  CHECK_OK(hb_context_barrier(ctx, 0));
  hb_context_destroy(ctx);
  std::printf("[mp_metrics r%d] ok\n", g_mp_rank);
  return 0;
}
