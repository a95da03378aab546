// The hb_metric_* entry points. A metric with a context merges every rank's
// serialized state in hb_metric_result (collective); without one it is a
// local metric, as serving stacks use it.
#include <memory>
#include <string>

#include "abi/error.h"
#include "context/context.h"
#include "metrics/exchange.h"
#include "metrics/handle.h"
#include "timeline/timeline.h"

namespace {

hb_metric &metric_ref(hb_metric *m) {
  if (!m) hb::fail(HB_ERR_INVALID_ARGUMENT, "metric is NULL");
  return *m;
}

double merged_result(hb_metric &m) {
  using namespace hb::metrics;
  // Serialize, gather every rank's state, merge, compute.
  hb::timeline::Span span("metric_merge", "metrics");
  Bytes mine = serialize(m.cfg, *m.state);
  span.set_bytes(static_cast<int64_t>(mine.size()));
  hb::ConfigFields fields = config_fields(m.cfg);
  MergeSig sig{m.cfg.kind, &fields, m.merges, &m.merges};
  Gathered g = allgather_bytes(m.ctx, mine, sig);
  std::unique_ptr<State> merged = make_state(m.cfg);
  for (size_t r = 0; r < g.sizes.size(); ++r) {
    std::string source = hb::format("rank %zu", r);
    merge_serialized(m.cfg, merged.get(), g.bytes.data() + g.offsets[r],
                     static_cast<size_t>(g.sizes[r]), source.c_str());
  }
  return merged->result(&m.flags);
}

}  // namespace

double hb::metrics::result(hb_metric &m) {
  if (m.ctx && m.ctx->cluster.world_size > 1) return merged_result(m);
  return m.state->result(&m.flags);
}

extern "C" {

hb_status hb_metric_create(hb_context *ctx, const hb_metric_config *cfg,
                           hb_metric **out) {
  return hb::guard([&] {
    HB_CHECK_ARG(out, "out is NULL");
    *out = nullptr;
    auto m = std::make_unique<hb_metric>();
    m->ctx = ctx;
    m->cfg = hb::metrics::config_from_public(cfg);
    m->state = hb::metrics::make_state(m->cfg);
    *out = m.release();
  });
}

void hb_metric_destroy(hb_metric *m) { delete m; }

hb_status hb_metric_update(hb_metric *m, const float *labels,
                           const float *preds, const float *weights, size_t n) {
  return hb::guard([&] {
    hb_metric &mm = metric_ref(m);
    if (mm.cfg.kind == HB_METRIC_GAUC)
      hb::fail(
          HB_ERR_INVALID_ARGUMENT,
          "GAUC needs a group id per sample: call hb_metric_update_grouped");
    mm.state->update({labels, preds, weights, nullptr, n});
  });
}

hb_status hb_metric_update_grouped(hb_metric *m, const float *labels,
                                   const float *preds, const float *weights,
                                   const int64_t *groups, size_t n) {
  return hb::guard([&] {
    hb_metric &mm = metric_ref(m);
    if (mm.cfg.kind != HB_METRIC_GAUC)
      hb::fail(HB_ERR_INVALID_ARGUMENT,
               "hb_metric_update_grouped is for HB_METRIC_GAUC (this metric's "
               "kind is %d)",
               mm.cfg.kind);
    mm.state->update({labels, preds, weights, groups, n});
  });
}

hb_status hb_metric_result(hb_metric *m, double *out) {
  return hb::guard([&] {
    hb_metric &mm = metric_ref(m);
    HB_CHECK_ARG(out, "out is NULL");
    *out = hb::metrics::result(mm);
  });
}

int32_t hb_metric_flags(const hb_metric *m) { return m ? m->flags : 0; }

hb_status hb_metric_reset(hb_metric *m) {
  return hb::guard([&] {
    hb_metric &mm = metric_ref(m);
    mm.state->reset();
    mm.flags = 0;
  });
}

}  // extern "C"
