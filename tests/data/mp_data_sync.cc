// One rank of the multi-process hb_data_sync test (3 ranks under hbrun).
// Ranks hold 5, 7 and 0 batches (then 5, 7 and 3). A training loop built on
// hb_data_sync (one allreduce per step, like a gradient exchange) must end
// on every rank together:
//   drop_remainder: every rank stops as soon as any rank is out;
//   otherwise:      every rank runs max(batches) steps, feeding empty
//                   batches once it is out.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/mp_check.h"
#include "hb.h"

int g_mp_rank = -1;
const char *g_mp_name = "mp_data_sync";

int main() {
  hb_context *ctx = nullptr;
  CHECK_OK(hb_context_create(nullptr, &ctx));
  g_mp_rank = hb_context_rank(ctx);
  const int world = hb_context_world_size(ctx);
  CHECK(world == 3, "this test runs on 3 ranks, not %d", world);

  const std::vector<std::vector<int>> layouts = {{5, 7, 0}, {5, 7, 3}};
  for (const std::vector<int> &batches : layouts)
    for (int drop = 0; drop <= 1; ++drop) {
      int have = batches[g_mp_rank];
      int steps = 0, empty_steps = 0, consumed = 0;
      for (int guard = 0; guard < 100; ++guard) {
        int32_t cont = -1, feed_empty = -1;
        CHECK_OK(hb_data_sync(ctx, consumed < have, drop, &cont, &feed_empty));
        if (!cont) break;
        ++steps;
        float batch_size = 0;
        if (feed_empty) {
          CHECK(consumed == have, "told to feed empty with data left");
          ++empty_steps;
        } else {
          CHECK(consumed < have, "told to feed data with none left");
          ++consumed;
          batch_size = 32;
        }
        // The training step: a collective every rank must join.
        float total = batch_size;
        CHECK_OK(hb_allreduce(ctx, &total, &total, 1, HB_FLOAT32, HB_SUM));
      }
      int lo = *std::min_element(batches.begin(), batches.end());
      int hi = *std::max_element(batches.begin(), batches.end());
      int want_steps = drop ? lo : hi;
      int want_empty = drop ? 0 : hi - have;
      CHECK(steps == want_steps, "layout %d,%d,%d drop=%d: %d steps, want %d",
            batches[0], batches[1], batches[2], drop, steps, want_steps);
      CHECK(empty_steps == want_empty, "drop=%d: %d empty steps, want %d", drop,
            empty_steps, want_empty);
      std::printf(
          "[mp_data_sync r%d] batches %d,%d,%d drop_remainder=%d: %d steps (%d "
          "empty)\n",
          g_mp_rank, batches[0], batches[1], batches[2], drop, steps,
          empty_steps);
    }
  // Ranks that pass different drop_remainder values would decide
  // differently: every rank fails with HB_ERR_MISMATCH naming rank 2, and
  // the next matched call works.
  int32_t cont = -1;
  hb_status st = hb_data_sync(ctx, 1, g_mp_rank == 2, &cont, nullptr);
  CHECK(st == HB_ERR_MISMATCH, "drop_remainder mismatch gave %s: %s",
        hb_status_name(st), hb_last_error());
  CHECK(std::strstr(hb_last_error(), "rank 2 differs"), "message: %s",
        hb_last_error());
  CHECK_OK(hb_data_sync(ctx, 1, 1, &cont, nullptr));
  CHECK(cont == 1, "matched call after a mismatch: cont %d", cont);
  CHECK_OK(hb_context_barrier(ctx, 0));
  hb_context_destroy(ctx);
  return 0;
}
