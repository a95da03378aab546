// Argument checks shared by every collective entry point: each throws
// HB_ERR_INVALID_ARGUMENT with a message naming the call, the argument and,
// for arrays, the index. They need only the rank and world size, so tests
// reach them without a context.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "hb.h"

namespace hb {
namespace comm {

// Element size of dtype; checks count * size (times `blocks`) fits in
// int64_t and that buf is not NULL when there is anything to move.
size_t check_buffer(const char *fn, const char *arg, const void *buf,
                    size_t count, hb_dtype dtype, size_t blocks = 1);
void check_op(const char *fn, hb_reduce_op op);
void check_root(const char *fn, int32_t root, int world);

// Per-peer counts (required) and offsets (NULL: packed in rank order):
// non-negative, no overflow. Returns the offsets to use and, in *span, the
// elements the buffer must hold (max offset + count).
std::vector<int64_t> check_vector(const char *fn, const char *counts_name,
                                  const int64_t *counts,
                                  const char *offsets_name,
                                  const int64_t *offsets, int world,
                                  size_t elem_size, int64_t *span);

// hb_allreduce_many: bufs / counts arrays, each tensor, the total.
void check_many(void *const *bufs, const size_t *counts, size_t n,
                hb_dtype dtype);

}  // namespace comm
}  // namespace hb
