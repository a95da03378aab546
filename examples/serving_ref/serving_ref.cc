// The reference answer for the serving examples (serving_go, serving_java):
// scores held-out criteo-synth samples with an exported wide table, single
// threaded, and prints the exact AUC and the miss count they must reproduce.
//
//   serving_ref WIDE.hbe SEED VOCAB SAMPLES
//
// The scorer (the same in every serving example): sample i of split 1 looks
// up the wide ids t * VOCAB + ids[t] of its 26 tables, except that every
// 16th sample (i % 16 == 0) asks for id 26 * VOCAB + i in place of table
// 25's, an id the table never holds (a miss, read as zero). The score is
// sigmoid(sum of the 26 rows), summed in double in table order.
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "hb.h"
#include "synth_data.h"

static int fail(const char *what) {
  std::fprintf(stderr, "serving_ref: %s: %s\n", what, hb_last_error());
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: serving_ref WIDE.hbe SEED VOCAB SAMPLES\n");
    return 2;
  }
  uint64_t seed = std::strtoull(argv[2], nullptr, 10);
  int64_t vocab = std::atoll(argv[3]), n = std::atoll(argv[4]);
  if (vocab <= 0 || (vocab & (vocab - 1)) || n <= 0) {
    std::fprintf(stderr, "serving_ref: VOCAB a power of two, SAMPLES > 0\n");
    return 2;
  }
  hb_embedding *wide = nullptr;
  if (hb_embedding_open(argv[1], &wide) != HB_OK) return fail(argv[1]);
  if (hb_embedding_dim(wide) != 1) {
    std::fprintf(stderr, "serving_ref: %s: dim %" PRId64 ", expected 1\n",
                 argv[1], hb_embedding_dim(wide));
    return 1;
  }
  synth::Generator gen(seed, vocab, 1.1);
  synth::Sample s;
  const int T = synth::kTables;
  std::vector<int64_t> ids(T);
  std::vector<float> rows(T), labels(n), preds(n), planted(n);
  for (int64_t i = 0; i < n; ++i) {
    gen.sample(/*split=*/1, i, &s);
    for (int t = 0; t < T; ++t) ids[t] = t * vocab + s.ids[t];
    if (i % 16 == 0) ids[T - 1] = T * vocab + i;
    if (hb_embedding_lookup(wide, ids.data(), T, rows.data()) != HB_OK)
      return fail("lookup");
    double score = 0;
    for (int t = 0; t < T; ++t) score += rows[t];
    preds[i] = static_cast<float>(1.0 / (1.0 + std::exp(-score)));
    labels[i] = s.label;
    planted[i] = s.planted_prob;
  }
  double auc = 0, planted_auc = 0;
  for (auto [p, out] : {std::pair{&preds, &auc}, {&planted, &planted_auc}}) {
    hb_metric_config mc = HB_METRIC_CONFIG_INIT;
    mc.kind = HB_METRIC_AUC_EXACT;
    hb_metric *m = nullptr;
    if (hb_metric_create(nullptr, &mc, &m) != HB_OK ||
        hb_metric_update(m, labels.data(), p->data(), nullptr, n) != HB_OK ||
        hb_metric_result(m, out) != HB_OK)
      return fail("metric");
    hb_metric_destroy(m);
  }
  std::printf("serving_ref: %" PRId64 " samples, wide table of %" PRId64
              " rows; planted model AUC %.4f\n",
              n, hb_embedding_local_rows(wide), planted_auc);
  std::printf("AUC %.9f misses %" PRIu64 "\n", auc, hb_embedding_misses(wide));
  hb_embedding_destroy(wide);
  return 0;
}
