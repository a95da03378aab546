#include "data/data_sync.h"

#include "abi/error.h"
#include "comm/communicator.h"
#include "context/context.h"
#include "hb.h"
#include "timeline/timeline.h"

extern "C" hb_status hb_data_sync(hb_context *ctx, int32_t local_has_data,
                                  int32_t drop_remainder, int32_t *out_continue,
                                  int32_t *out_feed_empty) {
  return hb::guard([&] {
    HB_CHECK_ARG(ctx, "context is NULL");
    HB_CHECK_ARG(out_continue, "out_continue is NULL");
    hb::timeline::Span span("data_sync", "data");
    bool has = local_has_data != 0;
    // Both flags in one collective, so ranks agree even if they passed
    // different drop_remainder values.
    int32_t flags[2] = {has ? 1 : 0, has ? 0 : 1};
    if (ctx->cluster.world_size > 1) {
      try {
        hb::comm::allreduce(*ctx, hb::comm::Memory::kHost, flags, flags, 2,
                            HB_INT32, HB_MAX);
      } catch (const hb::Error &e) {
        hb::fail(e.status(), "hb_data_sync: allreduce failed: %s", e.what());
      }
    }
    hb::data::SyncDecision d =
        hb::data::decide(flags[0], flags[1], drop_remainder != 0, has);
    *out_continue = d.cont;
    if (out_feed_empty) *out_feed_empty = d.feed_empty;
  });
}
