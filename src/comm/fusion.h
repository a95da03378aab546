// Gradient fusion: how hb_allreduce_many groups tensors into buckets.
// Depends only on the counts and options, which every rank shares, so
// every rank builds the same buckets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "comm/backend.h"

namespace hb {
namespace comm {

// nbuckets > 0: that many buckets of about equal bytes (HybridBackend's
// HB_GRAD_NBUCKETS; fewer when there are fewer tensors). Otherwise buckets
// of at most bucket_bytes (a larger tensor is a bucket of its own).
// Empty tensors are left out; order is preserved.
std::vector<std::vector<Tensor>> plan_buckets(void *const *bufs,
                                              const size_t *counts, size_t n,
                                              size_t elem_size,
                                              int64_t nbuckets,
                                              int64_t bucket_bytes);

}  // namespace comm
}  // namespace hb
