#include "metrics/exchange.h"

#include "abi/error.h"
#include "hb.h"

namespace hb {
namespace metrics {
namespace {

void check(hb_status st, const char *what) {
  if (st != HB_OK)
    fail(st, "metric result: %s failed: %s", what, hb_last_error());
}

}  // namespace

Gathered allgather_bytes(hb_context *ctx, const Bytes &mine) {
  const int world = hb_context_world_size(ctx);
  int64_t my_size = static_cast<int64_t>(mine.size());
  Gathered g;
  std::vector<int64_t> &sizes = g.sizes, &offsets = g.offsets;
  sizes.resize(world);
  offsets.resize(world);
  check(hb_allgather(ctx, &my_size, sizes.data(), 1, HB_INT64),
        "hb_allgather of state sizes");
  int64_t total = 0;
  for (int r = 0; r < world; ++r) {
    if (sizes[r] < 0)
      fail(HB_ERR_CORRUPT, "metric result: rank %d reported size %lld", r,
           static_cast<long long>(sizes[r]));
    offsets[r] = total;
    total += sizes[r];
  }
  g.bytes.resize(static_cast<size_t>(total));
  check(hb_allgatherv(ctx, mine.data(), mine.size(), g.bytes.data(),
                      sizes.data(), offsets.data(), HB_UINT8),
        "hb_allgatherv of states");
  return g;
}

}  // namespace metrics
}  // namespace hb
