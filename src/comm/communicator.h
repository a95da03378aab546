// The collectives of a context for code inside the library: the public
// entry points (collectives_api.cc: guard, validate, pick the memory once)
// and the library's own modules (embedding exchange, metric merge, data
// sync, GPU tables) all end here. Arguments are trusted: the caller built
// them or validated them (comm/validate.h). Each call checks the context's
// health, records a timeline span (timeline/timeline.h) and runs on the
// context's CPU backend (host memory, created on first use) or NCCL through
// the CUDA plugin (CUDA memory). Throws hb::Error.
//
// Counts and offsets are in elements of dtype. Offsets may be NULL: packed
// in rank order.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hb.h"

namespace hb {
namespace comm {

class Backend;
struct BackendConfig;

// Where every buffer of one call lives.
enum class Memory { kHost, kCuda };

// The context's CPU backend (created on first use).
Backend &cpu_backend(hb_context &ctx);
// The configuration cpu_backend builds its backend with (the context's
// options); comm/progress.cc builds its second communicator from it.
BackendConfig cpu_backend_config(hb_context &ctx);

void allreduce(hb_context &ctx, Memory mem, const void *send, void *recv,
               size_t count, hb_dtype dtype, hb_reduce_op op);
// Each tensor reduced in place; host tensors are fused into buckets (options
// grad_nbuckets / grad_bucket_bytes), CUDA tensors go one call each.
void allreduce_many(hb_context &ctx, Memory mem, void *const *tensors,
                    const size_t *counts, size_t n, hb_dtype dtype,
                    hb_reduce_op op);
void allgather(hb_context &ctx, Memory mem, const void *send, void *recv,
               size_t count, hb_dtype dtype);
void allgatherv(hb_context &ctx, Memory mem, const void *send,
                size_t send_count, void *recv, const int64_t *recv_counts,
                const int64_t *recv_offsets, hb_dtype dtype);
void alltoall(hb_context &ctx, Memory mem, const void *send, void *recv,
              size_t count, hb_dtype dtype);
void alltoallv(hb_context &ctx, Memory mem, const void *send,
               const int64_t *send_counts, const int64_t *send_offsets,
               void *recv, const int64_t *recv_counts,
               const int64_t *recv_offsets, hb_dtype dtype);
// send is read on the root only.
void broadcast(hb_context &ctx, Memory mem, const void *send, void *recv,
               size_t count, hb_dtype dtype, int root);
void reduce_scatter(hb_context &ctx, Memory mem, const void *send, void *recv,
                    size_t recv_count, hb_dtype dtype, hb_reduce_op op);

}  // namespace comm
}  // namespace hb
