#include "metrics/state.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "abi/error.h"
#include "metrics/auc_state.h"
#include "metrics/ratio_state.h"

namespace hb {
namespace metrics {
namespace {

constexpr uint32_t kMagic = 0x314d4248;  // "HBM1"
constexpr int32_t kMaxThresholds = 1 << 24;
constexpr int64_t kMaxBins = int64_t(1) << 28;

}  // namespace

ConfigFields config_fields(const Config &c) {
  static const char *const kKinds[] = {"HB_METRIC_ACCURACY", "HB_METRIC_MEAN",
                                       "HB_METRIC_AUC", "HB_METRIC_AUC_EXACT",
                                       "HB_METRIC_GAUC"};
  static const char *const kCurves[] = {"HB_CURVE_ROC", "HB_CURVE_PR"};
  static const char *const kSummations[] = {
      "HB_SUMMATION_TRAPEZOIDAL", "HB_SUMMATION_CAREFUL_INTERPOLATION",
      "HB_SUMMATION_MINORING", "HB_SUMMATION_MAJORING"};
  static const char *const kWeightings[] = {
      "HB_GAUC_UNWEIGHTED", "HB_GAUC_IMPRESSIONS", "HB_GAUC_CLICKS"};
  // A validated config: every enum is in range.
  ConfigFields f;
  f.add("kind", kKinds[c.kind]);
  f.add("num_thresholds", int64_t{c.num_thresholds});
  f.add("curve", kCurves[c.curve]);
  f.add("summation", kSummations[c.summation]);
  f.add("gauc_weighting", kWeightings[c.gauc_weighting]);
  f.add_real("threshold", c.threshold);
  f.add("bins", c.bins);
  return f;
}

Config config_from_public(const hb_metric_config *cfg) {
  Config c;
  if (!cfg) return c;
  hb_metric_config full = HB_METRIC_CONFIG_INIT;
  HB_CHECK_ARG(
      cfg->struct_size >= offsetof(hb_metric_config, kind) + sizeof(int32_t),
      "hb_metric_config.struct_size = %zu is too small (set it to "
      "sizeof(hb_metric_config))",
      cfg->struct_size);
  std::memcpy(&full, cfg, std::min(cfg->struct_size, sizeof full));
  HB_CHECK_ARG(full.kind >= HB_METRIC_ACCURACY && full.kind <= HB_METRIC_GAUC,
               "hb_metric_config.kind = %d is not an hb_metric_kind_code",
               full.kind);
  c.kind = full.kind;
  if (c.kind == HB_METRIC_AUC) {
    HB_CHECK_ARG(
        full.num_thresholds >= 2 && full.num_thresholds <= kMaxThresholds,
        "hb_metric_config.num_thresholds = %d must be in [2, %d]",
        full.num_thresholds, kMaxThresholds);
    HB_CHECK_ARG(full.curve == HB_CURVE_ROC || full.curve == HB_CURVE_PR,
                 "hb_metric_config.curve = %d is not an hb_curve_code",
                 full.curve);
    HB_CHECK_ARG(full.summation >= HB_SUMMATION_TRAPEZOIDAL &&
                     full.summation <= HB_SUMMATION_MAJORING,
                 "hb_metric_config.summation = %d is not an hb_summation_code",
                 full.summation);
    c.num_thresholds = full.num_thresholds;
    c.curve = full.curve;
    c.summation = full.summation;
  }
  if (c.kind == HB_METRIC_GAUC) {
    HB_CHECK_ARG(
        full.gauc_weighting >= HB_GAUC_UNWEIGHTED &&
            full.gauc_weighting <= HB_GAUC_CLICKS,
        "hb_metric_config.gauc_weighting = %d is not an hb_gauc_weighting_code",
        full.gauc_weighting);
    c.gauc_weighting = full.gauc_weighting;
  }
  if (c.kind == HB_METRIC_ACCURACY) {
    HB_CHECK_ARG(!std::isnan(full.threshold),
                 "hb_metric_config.threshold is NaN");
    c.threshold = full.threshold < 0.0 ? -1.0 : full.threshold;
  }
  if (c.kind == HB_METRIC_AUC_EXACT || c.kind == HB_METRIC_GAUC) {
    HB_CHECK_ARG(full.bins >= 0 && full.bins <= kMaxBins,
                 "hb_metric_config.bins = %lld must be in [0, %lld]",
                 static_cast<long long>(full.bins),
                 static_cast<long long>(kMaxBins));
    if (c.kind == HB_METRIC_GAUC && full.bins != 0)
      fail(HB_ERR_UNSUPPORTED,
           "hb_metric_config.bins = %lld: GAUC has no bounded-memory variant "
           "(use bins = 0)",
           static_cast<long long>(full.bins));
    c.bins = full.bins;
  }
  return c;
}

std::unique_ptr<State> make_state(const Config &cfg) {
  switch (cfg.kind) {
    case HB_METRIC_ACCURACY:
    case HB_METRIC_MEAN:
      return std::make_unique<RatioState>(cfg);
    case HB_METRIC_AUC:
      return std::make_unique<ThresholdAucState>(cfg);
    case HB_METRIC_AUC_EXACT:
      if (cfg.bins > 0) return std::make_unique<BinnedAucState>(cfg.bins);
      return std::make_unique<ExactAucState>();
    case HB_METRIC_GAUC:
      return std::make_unique<GaucState>(cfg.gauc_weighting);
  }
  fail(HB_ERR_INVALID_ARGUMENT, "unknown metric kind %d", cfg.kind);
}

static void write_header(Writer &w, const Config &c) {
  w.u32(kMagic);
  w.i32(c.kind);
  w.i32(c.num_thresholds);
  w.i32(c.curve);
  w.i32(c.summation);
  w.i32(c.gauc_weighting);
  w.f64(c.threshold);
  w.i64(c.bins);
}

Bytes serialize(const Config &cfg, const State &s) {
  Bytes out;
  Writer w(&out);
  write_header(w, cfg);
  s.write_payload(w);
  return out;
}

void merge_serialized(const Config &cfg, State *s, const unsigned char *data,
                      size_t size, const char *source) {
  Reader r(data, size, std::string(source) + "'s metric state");
  uint32_t magic = r.u32();
  if (magic != kMagic)
    fail(HB_ERR_CORRUPT, "%s: bad magic 0x%08x at byte offset 0",
         r.what().c_str(), magic);
  Config c;
  c.kind = r.i32();
  c.num_thresholds = r.i32();
  c.curve = r.i32();
  c.summation = r.i32();
  c.gauc_weighting = r.i32();
  c.threshold = r.f64();
  c.bins = r.i64();
#define HB_SAME(field, fmt, cast)                                      \
  if (c.field != cfg.field)                                            \
    fail(HB_ERR_INVALID_ARGUMENT,                                      \
         "%s: metric config differs: " #field " = " fmt " there, " fmt \
         " here",                                                      \
         source, static_cast<cast>(c.field), static_cast<cast>(cfg.field));
  HB_SAME(kind, "%d", int)
  HB_SAME(num_thresholds, "%d", int)
  HB_SAME(curve, "%d", int)
  HB_SAME(summation, "%d", int)
  HB_SAME(gauc_weighting, "%d", int)
  HB_SAME(threshold, "%g", double)
  HB_SAME(bins, "%lld", long long)
#undef HB_SAME
  // Every payload parser reads (and bounds-checks) before it changes s.
  s->merge_payload(r);
  r.expect_end();
}

}  // namespace metrics
}  // namespace hb
