#include "comm/validate.h"

#include "abi/dtype.h"
#include "abi/error.h"

namespace hb {
namespace comm {

size_t check_buffer(const char *fn, const char *arg, const void *buf,
                    size_t count, hb_dtype dtype, size_t blocks) {
  size_t es = hb_dtype_size(dtype);
  HB_CHECK_ARG(es != 0, "%s: unknown dtype %d", fn, dtype);
  const size_t limit = static_cast<size_t>(INT64_MAX) / es;
  HB_CHECK_ARG(blocks == 0 || count <= limit / blocks,
               "%s: %s: %zu elements of %s (x%zu) overflow a 64-bit byte count",
               fn, arg, count, dtype_name(dtype), blocks);
  HB_CHECK_ARG(buf != nullptr || count == 0 || blocks == 0,
               "%s: %s is NULL but count is %zu", fn, arg, count);
  return es;
}

void check_op(const char *fn, hb_reduce_op op) {
  HB_CHECK_ARG(op >= HB_SUM && op <= HB_AVG, "%s: unknown reduce op %d", fn,
               op);
}

void check_root(const char *fn, int32_t root, int world) {
  HB_CHECK_ARG(root >= 0 && root < world,
               "%s: root %d is not a rank of this world of %d", fn, root,
               world);
}

std::vector<int64_t> check_vector(const char *fn, const char *counts_name,
                                  const int64_t *counts,
                                  const char *offsets_name,
                                  const int64_t *offsets, int world,
                                  size_t elem_size, int64_t *span) {
  HB_CHECK_ARG(counts != nullptr, "%s: %s is NULL", fn, counts_name);
  const int64_t limit = INT64_MAX / static_cast<int64_t>(elem_size);
  std::vector<int64_t> off(static_cast<size_t>(world));
  int64_t packed_at = 0, end = 0;
  for (int r = 0; r < world; ++r) {
    HB_CHECK_ARG(counts[r] >= 0, "%s: %s[%d] = %lld is negative", fn,
                 counts_name, r, static_cast<long long>(counts[r]));
    if (offsets) {
      HB_CHECK_ARG(offsets[r] >= 0, "%s: %s[%d] = %lld is negative", fn,
                   offsets_name, r, static_cast<long long>(offsets[r]));
      off[r] = offsets[r];
    } else {
      off[r] = packed_at;
    }
    HB_CHECK_ARG(counts[r] <= limit - off[r] && counts[r] <= limit - packed_at,
                 "%s: %s[%d] + %s[%d] overflows a 64-bit byte count", fn,
                 offsets_name, r, counts_name, r);
    packed_at += counts[r];
    if (counts[r] > 0 && off[r] + counts[r] > end) end = off[r] + counts[r];
  }
  *span = end;
  return off;
}

void check_many(void *const *bufs, const size_t *counts, size_t n,
                hb_dtype dtype) {
  const char *fn = "hb_allreduce_many";
  size_t es = hb_dtype_size(dtype);
  HB_CHECK_ARG(es != 0, "%s: unknown dtype %d", fn, dtype);
  if (n == 0) return;
  HB_CHECK_ARG(bufs != nullptr, "%s: bufs is NULL but n is %zu", fn, n);
  HB_CHECK_ARG(counts != nullptr, "%s: counts is NULL but n is %zu", fn, n);
  const size_t limit = static_cast<size_t>(INT64_MAX) / es;
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    HB_CHECK_ARG(bufs[i] != nullptr || counts[i] == 0,
                 "%s: bufs[%zu] is NULL but counts[%zu] is %zu", fn, i, i,
                 counts[i]);
    HB_CHECK_ARG(counts[i] <= limit - total,
                 "%s: counts[%zu] = %zu makes the total overflow", fn, i,
                 counts[i]);
    total += counts[i];
  }
}

}  // namespace comm
}  // namespace hb
