// hb_shard_range: contiguous, even assignment of items to shards. The first
// num_items % num_shards shards get one item more.
#include "abi/error.h"
#include "hb.h"

extern "C" hb_status hb_shard_range(int64_t num_items, int32_t num_shards,
                                    int32_t shard, int32_t strict,
                                    int64_t *begin, int64_t *end) {
  return hb::guard([&] {
    HB_CHECK_ARG(begin && end, "begin or end is NULL");
    HB_CHECK_ARG(num_items >= 0, "num_items = %lld is negative",
                 static_cast<long long>(num_items));
    HB_CHECK_ARG(num_shards >= 1, "num_shards = %d must be >= 1", num_shards);
    HB_CHECK_ARG(shard >= 0 && shard < num_shards,
                 "shard = %d is outside [0, %d)", shard, num_shards);
    int64_t base = num_items / num_shards;
    int64_t rem = num_items % num_shards;
    int64_t b = shard * base + (shard < rem ? shard : rem);
    int64_t e = b + base + (shard < rem ? 1 : 0);
    if (strict && e == b)
      hb::fail(HB_ERR_INVALID_ARGUMENT,
               "strict sharding: shard %d of %d gets no items (num_items = "
               "%lld < num_shards)",
               shard, num_shards, static_cast<long long>(num_items));
    *begin = b;
    *end = e;
  });
}
