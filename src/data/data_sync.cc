#include "data/data_sync.h"

#include <vector>

#include "abi/error.h"
#include "comm/communicator.h"
#include "common/mismatch.h"
#include "context/context.h"
#include "hb.h"
#include "timeline/timeline.h"

namespace {
// Marks an hb_data_sync row ("hbdsync" in ASCII).
const int64_t kDataSyncTag = 0x68626473796e63;
}  // namespace

extern "C" hb_status hb_data_sync(hb_context *ctx, int32_t local_has_data,
                                  int32_t drop_remainder, int32_t *out_continue,
                                  int32_t *out_feed_empty) {
  return hb::guard([&] {
    HB_CHECK_ARG(ctx, "context is NULL");
    HB_CHECK_ARG(out_continue, "out_continue is NULL");
    hb_context &c = hb::ctx_ref(ctx);
    c.check();
    hb::timeline::Span span("data_sync", "data");
    const bool has = local_has_data != 0, drop = drop_remainder != 0;
    int32_t any_has = has, any_out = !has;
    const int world = c.cluster.world_size;
    if (world > 1) {
      // One allgather of {tag, drop_remainder, call number, has_data}: every
      // rank sees every rank's call, so ranks that passed different
      // drop_remainder values (they would decide differently) or are at
      // different points of the data_sync sequence all fail alike.
      const int kRow = 4;
      int64_t row[kRow] = {kDataSyncTag, drop, c.data_syncs.load(), has};
      std::vector<int64_t> all(static_cast<size_t>(kRow) * world);
      try {
        hb::comm::allgather(c, hb::comm::Memory::kHost, row, all.data(), kRow,
                            HB_INT64);
      } catch (const hb::Error &e) {
        hb::fail(e.status(), "hb_data_sync: allgather failed: %s", e.what());
      }
      hb::check_same_calls(
          all.data(), world, kRow, 0, 3, "hb_data_sync", [](const int64_t *r) {
            return r[0] == kDataSyncTag
                       ? hb::format(
                             "hb_data_sync(drop_remainder=%lld), call "
                             "%lld",
                             (long long)r[1], (long long)r[2])
                       : std::string("another collective");
          });
      ++c.data_syncs;
      any_has = any_out = 0;
      for (int r = 0; r < world; ++r) {
        any_has |= all[static_cast<size_t>(r) * kRow + 3] != 0;
        any_out |= all[static_cast<size_t>(r) * kRow + 3] == 0;
      }
    }
    hb::data::SyncDecision d = hb::data::decide(any_has, any_out, drop, has);
    *out_continue = d.cont;
    if (out_feed_empty) *out_feed_empty = d.feed_empty;
  });
}
