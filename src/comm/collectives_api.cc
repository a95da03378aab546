// The collective entry points of hb.h: check the context's health, validate
// the arguments, pick the memory (host or CUDA) once, then run the internal
// communicator (comm/communicator.h), which the library's own modules call
// directly.
#include "abi/error.h"
#include "comm/communicator.h"
#include "comm/validate.h"
#include "context/context.h"
#include "gpu/gpu.h"

namespace hb {
namespace comm {
namespace {

// Validated context whose collectives may run.
hb_context &use(hb_context *ctx) {
  hb_context &c = ctx_ref(ctx);
  c.check();
  return c;
}

// CUDA when the buffers are CUDA memory; a mix of host and device is an
// argument error.
Memory memory_of(const char *fn, const void *send, const void *recv) {
  bool s = send && gpu::is_device_pointer(send);
  bool r = recv && gpu::is_device_pointer(recv);
  HB_CHECK_ARG(s == r || !send || !recv,
               "%s: send is %s memory but recv is %s memory", fn,
               s ? "CUDA" : "host", r ? "CUDA" : "host");
  return s || r ? Memory::kCuda : Memory::kHost;
}

}  // namespace
}  // namespace comm
}  // namespace hb

using hb::comm::check_buffer;
using hb::comm::Memory;
using hb::comm::memory_of;

extern "C" hb_status hb_allreduce(hb_context *ctx, const void *send, void *recv,
                                  size_t count, hb_dtype dtype,
                                  hb_reduce_op op) {
  return hb::guard([&] {
    const char *fn = "hb_allreduce";
    hb_context &c = hb::comm::use(ctx);
    check_buffer(fn, "send", send, count, dtype);
    check_buffer(fn, "recv", recv, count, dtype);
    hb::comm::check_op(fn, op);
    hb::comm::allreduce(c, memory_of(fn, send, recv), send, recv, count, dtype,
                        op);
  });
}

extern "C" hb_status hb_allreduce_many(hb_context *ctx, void *const *bufs,
                                       const size_t *counts, size_t n,
                                       hb_dtype dtype, hb_reduce_op op) {
  return hb::guard([&] {
    const char *fn = "hb_allreduce_many";
    hb_context &c = hb::comm::use(ctx);
    hb::comm::check_many(bufs, counts, n, dtype);
    hb::comm::check_op(fn, op);
    if (n == 0) return;
    bool device = false;
    for (size_t i = 0; i < n; ++i) {
      if (!counts[i]) continue;
      bool d = hb::gpu::is_device_pointer(bufs[i]);
      HB_CHECK_ARG(i == 0 || d == device || !counts[i],
                   "%s: bufs[%zu] is %s memory but earlier tensors are not", fn,
                   i, d ? "CUDA" : "host");
      device = d;
    }
    hb::comm::allreduce_many(c, device ? Memory::kCuda : Memory::kHost, bufs,
                             counts, n, dtype, op);
  });
}

extern "C" hb_status hb_allgatherv(hb_context *ctx, const void *send,
                                   size_t send_count, void *recv,
                                   const int64_t *recv_counts,
                                   const int64_t *recv_offsets,
                                   hb_dtype dtype) {
  return hb::guard([&] {
    const char *fn = "hb_allgatherv";
    hb_context &c = hb::comm::use(ctx);
    const int world = c.cluster.world_size, me = c.cluster.rank;
    size_t es = check_buffer(fn, "send", send, send_count, dtype);
    int64_t span = 0;
    auto off =
        hb::comm::check_vector(fn, "recv_counts", recv_counts, "recv_offsets",
                               recv_offsets, world, es, &span);
    check_buffer(fn, "recv", recv, static_cast<size_t>(span), dtype);
    HB_CHECK_ARG(static_cast<int64_t>(send_count) == recv_counts[me],
                 "%s: rank %d sends %zu elements but recv_counts[%d] = %lld",
                 fn, me, send_count, me,
                 static_cast<long long>(recv_counts[me]));
    hb::comm::allgatherv(c, memory_of(fn, send, recv), send, send_count, recv,
                         recv_counts, off.data(), dtype);
  });
}

extern "C" hb_status hb_allgather(hb_context *ctx, const void *send, void *recv,
                                  size_t count, hb_dtype dtype) {
  return hb::guard([&] {
    const char *fn = "hb_allgather";
    hb_context &c = hb::comm::use(ctx);
    const int world = c.cluster.world_size;
    check_buffer(fn, "send", send, count, dtype);
    check_buffer(fn, "recv", recv, count, dtype, static_cast<size_t>(world));
    hb::comm::allgather(c, memory_of(fn, send, recv), send, recv, count, dtype);
  });
}

extern "C" hb_status hb_alltoallv(hb_context *ctx, const void *send,
                                  const int64_t *send_counts,
                                  const int64_t *send_offsets, void *recv,
                                  const int64_t *recv_counts,
                                  const int64_t *recv_offsets, hb_dtype dtype) {
  return hb::guard([&] {
    const char *fn = "hb_alltoallv";
    hb_context &c = hb::comm::use(ctx);
    const int world = c.cluster.world_size, me = c.cluster.rank;
    size_t es = check_buffer(fn, "send", send, 0, dtype);
    int64_t sspan = 0, rspan = 0;
    auto soff =
        hb::comm::check_vector(fn, "send_counts", send_counts, "send_offsets",
                               send_offsets, world, es, &sspan);
    auto roff =
        hb::comm::check_vector(fn, "recv_counts", recv_counts, "recv_offsets",
                               recv_offsets, world, es, &rspan);
    check_buffer(fn, "send", send, static_cast<size_t>(sspan), dtype);
    check_buffer(fn, "recv", recv, static_cast<size_t>(rspan), dtype);
    HB_CHECK_ARG(send_counts[me] == recv_counts[me],
                 "%s: rank %d sends itself send_counts[%d] = %lld elements but "
                 "expects recv_counts[%d] = %lld",
                 fn, me, me, static_cast<long long>(send_counts[me]), me,
                 static_cast<long long>(recv_counts[me]));
    Memory mem = memory_of(fn, sspan ? send : nullptr, rspan ? recv : nullptr);
    hb::comm::alltoallv(c, mem, send, send_counts, soff.data(), recv,
                        recv_counts, roff.data(), dtype);
  });
}

extern "C" hb_status hb_alltoall(hb_context *ctx, const void *send, void *recv,
                                 size_t count, hb_dtype dtype) {
  return hb::guard([&] {
    const char *fn = "hb_alltoall";
    hb_context &c = hb::comm::use(ctx);
    const int world = c.cluster.world_size;
    check_buffer(fn, "send", send, count, dtype, static_cast<size_t>(world));
    check_buffer(fn, "recv", recv, count, dtype, static_cast<size_t>(world));
    hb::comm::alltoall(c, memory_of(fn, send, recv), send, recv, count, dtype);
  });
}

extern "C" hb_status hb_broadcast(hb_context *ctx, const void *send, void *recv,
                                  size_t count, hb_dtype dtype, int32_t root) {
  return hb::guard([&] {
    const char *fn = "hb_broadcast";
    hb_context &c = hb::comm::use(ctx);
    hb::comm::check_root(fn, root, c.cluster.world_size);
    const bool is_root = c.cluster.rank == root;
    if (is_root) check_buffer(fn, "send", send, count, dtype);
    check_buffer(fn, "recv", recv, count, dtype);
    hb::comm::broadcast(c, memory_of(fn, is_root ? send : nullptr, recv), send,
                        recv, count, dtype, root);
  });
}

extern "C" hb_status hb_reduce_scatter(hb_context *ctx, const void *send,
                                       void *recv, size_t recv_count,
                                       hb_dtype dtype, hb_reduce_op op) {
  return hb::guard([&] {
    const char *fn = "hb_reduce_scatter";
    hb_context &c = hb::comm::use(ctx);
    check_buffer(fn, "send", send, recv_count, dtype,
                 static_cast<size_t>(c.cluster.world_size));
    check_buffer(fn, "recv", recv, recv_count, dtype);
    hb::comm::check_op(fn, op);
    hb::comm::reduce_scatter(c, memory_of(fn, send, recv), send, recv,
                             recv_count, dtype, op);
  });
}
