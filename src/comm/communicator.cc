#include "comm/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <vector>

#include "comm/backend.h"
#include "comm/fusion.h"
#include "context/context.h"
#include "context/context_gpu.h"
#include "gpu/gpu.h"
#include "rendezvous/client.h"
#include "rendezvous/server.h"
#include "timeline/timeline.h"

namespace hb {
namespace comm {
namespace {

gpu::CollectiveCall device_call(gpu::CollectiveCall::Kind kind,
                                const void *send, void *recv, size_t count,
                                hb_dtype dtype) {
  gpu::CollectiveCall c{};
  c.kind = kind;
  c.send = send;
  c.recv = recv;
  c.count = count;
  c.dtype = dtype;
  return c;
}

// Offsets to hand the backends: the caller's, or packed in rank order.
const int64_t *offsets_or_packed(const int64_t *counts, const int64_t *offsets,
                                 int world, std::vector<int64_t> &packed) {
  if (offsets) return offsets;
  packed.resize(static_cast<size_t>(world));
  int64_t at = 0;
  for (int r = 0; r < world; ++r) {
    packed[r] = at;
    at += counts[r];
  }
  return packed.data();
}

int64_t total(const int64_t *counts, int world) {
  int64_t n = 0;
  for (int r = 0; r < world; ++r) n += counts[r];
  return n;
}

int64_t bytes_of(size_t count, hb_dtype dtype) {
  return static_cast<int64_t>(count * hb_dtype_size(dtype));
}

// Uniform per-peer blocks of `count` elements.
void uniform_blocks(size_t count, int world, std::vector<int64_t> &counts,
                    std::vector<int64_t> &offsets) {
  counts.assign(static_cast<size_t>(world), static_cast<int64_t>(count));
  offsets.resize(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) offsets[r] = static_cast<int64_t>(count) * r;
}

}  // namespace

Backend &cpu_backend(hb_context &ctx) {
  if (ctx.cpu_comm) return *ctx.cpu_comm;
  ensure_world(ctx);  // parameter-server mode: formed on first use
  ctx.cpu_comm =
      make_backend(cpu_backend_config(ctx), ctx.client.get(), ctx.health);
  return *ctx.cpu_comm;
}

BackendConfig cpu_backend_config(hb_context &ctx) {
  BackendConfig cfg;
  cfg.rank = ctx.cluster.rank;
  cfg.world_size = ctx.cluster.world_size;
  cfg.timeout_ms = ctx.timeout_ms();
  cfg.peer_report_grace_ms =
      std::min<int64_t>(ctx.options.get_int("peer_timeout_ms") * 2, 10000);
  cfg.hostname = ctx.address;  // chosen at context creation (context/address.h)
  cfg.allreduce_algorithm = ctx.options.get_string("cpu_allreduce");
  cfg.piece_bytes = ctx.options.get_int("cpu_piece_bytes");
  cfg.one_round_bytes = ctx.options.get_int("cpu_one_round_bytes");
  cfg.staged_bytes = ctx.options.get_int("cpu_staged_bytes");
  cfg.transport = ctx.options.get_string("cpu_transport");
  cfg.shm_reduce = ctx.options.get_string("cpu_shm_reduce");
  cfg.alltoallv = ctx.options.get_string("cpu_alltoallv");
  cfg.allreduce_route = ctx.options.get_string("cpu_allreduce_route");
  cfg.wait_spin_us = ctx.options.get_int("cpu_wait_spin_us");
  cfg.wait_slice_us = ctx.options.get_int("cpu_wait_slice_us");
  // cpu_check_calls=auto: everywhere in debug builds; in release builds
  // only where it is (nearly) free -- over TCP the print is a round of its
  // own, which doubled a 4 KiB allreduce's latency.
  const std::string check = ctx.options.get_string("cpu_check_calls");
  cfg.check_calls = check != "0";
#ifdef NDEBUG
  cfg.check_calls_where_free = check == "auto";
#endif
  return cfg;
}

namespace {

// Health first, then the call on CUDA buffers (NCCL) or the CPU backend.
template <class Host>
void run(hb_context &ctx, Memory mem, const gpu::CollectiveCall &device,
         Host host) {
  ctx.check();
  if (mem == Memory::kCuda) return gpu::run_collective(ctx, device);
  host(cpu_backend(ctx));
}

}  // namespace

void allreduce(hb_context &ctx, Memory mem, const void *send, void *recv,
               size_t count, hb_dtype dtype, hb_reduce_op op) {
  timeline::Span span("allreduce", "comm", bytes_of(count, dtype));
  auto call =
      device_call(gpu::CollectiveCall::kAllreduce, send, recv, count, dtype);
  call.op = op;
  run(ctx, mem, call,
      [&](Backend &b) { b.allreduce(send, recv, count, dtype, op); });
}

void allreduce_many(hb_context &ctx, Memory mem, void *const *tensors,
                    const size_t *counts, size_t n, hb_dtype dtype,
                    hb_reduce_op op) {
  size_t elements = 0;
  for (size_t i = 0; i < n; ++i) elements += counts[i];
  timeline::Span span("allreduce_many", "comm", bytes_of(elements, dtype));
  span.arg("tensors", static_cast<int64_t>(n));
  ctx.check();
  if (mem == Memory::kCuda) {  // one call per tensor (NCCL fuses on its stream)
    for (size_t i = 0; i < n; ++i) {
      if (!counts[i]) continue;
      auto call = device_call(gpu::CollectiveCall::kAllreduce, tensors[i],
                              tensors[i], counts[i], dtype);
      call.op = op;
      gpu::run_collective(ctx, call);
    }
    return;
  }
  auto buckets = plan_buckets(tensors, counts, n, hb_dtype_size(dtype),
                              ctx.options.get_int("grad_nbuckets"),
                              ctx.options.get_int("grad_bucket_bytes"));
  cpu_backend(ctx).allreduce_buckets(buckets, dtype, op);
}

void allgather(hb_context &ctx, Memory mem, const void *send, void *recv,
               size_t count, hb_dtype dtype) {
  timeline::Span span("allgather", "comm", bytes_of(count, dtype));
  auto call =
      device_call(gpu::CollectiveCall::kAllgather, send, recv, count, dtype);
  run(ctx, mem, call, [&](Backend &b) {
    std::vector<int64_t> counts, offsets;
    uniform_blocks(count, b.world_size(), counts, offsets);
    b.allgatherv(send, count, recv, counts.data(), offsets.data(), dtype);
  });
}

void allgatherv(hb_context &ctx, Memory mem, const void *send,
                size_t send_count, void *recv, const int64_t *recv_counts,
                const int64_t *recv_offsets, hb_dtype dtype) {
  const int world = ctx.cluster.world_size;
  timeline::Span span("allgatherv", "comm");
  if (timeline::enabled())
    span.set_bytes(
        bytes_of(static_cast<size_t>(total(recv_counts, world)), dtype));
  std::vector<int64_t> packed;
  auto call = device_call(gpu::CollectiveCall::kAllgatherv, send, recv,
                          send_count, dtype);
  call.recv_counts = recv_counts;
  call.recv_offsets =
      offsets_or_packed(recv_counts, recv_offsets, world, packed);
  run(ctx, mem, call, [&](Backend &b) {
    b.allgatherv(send, send_count, recv, recv_counts, call.recv_offsets, dtype);
  });
}

void alltoall(hb_context &ctx, Memory mem, const void *send, void *recv,
              size_t count, hb_dtype dtype) {
  const int world = ctx.cluster.world_size;
  timeline::Span span("alltoall", "comm",
                      bytes_of(count * static_cast<size_t>(world), dtype));
  auto call =
      device_call(gpu::CollectiveCall::kAlltoall, send, recv, count, dtype);
  run(ctx, mem, call, [&](Backend &b) {
    std::vector<int64_t> counts, offsets;
    uniform_blocks(count, world, counts, offsets);
    b.alltoallv(send, counts.data(), offsets.data(), recv, counts.data(),
                offsets.data(), dtype);
  });
}

void alltoallv(hb_context &ctx, Memory mem, const void *send,
               const int64_t *send_counts, const int64_t *send_offsets,
               void *recv, const int64_t *recv_counts,
               const int64_t *recv_offsets, hb_dtype dtype) {
  const int world = ctx.cluster.world_size;
  timeline::Span span("alltoallv", "comm");
  if (timeline::enabled())
    span.set_bytes(
        bytes_of(static_cast<size_t>(total(send_counts, world)), dtype));
  std::vector<int64_t> spacked, rpacked;
  auto call =
      device_call(gpu::CollectiveCall::kAlltoallv, send, recv, 0, dtype);
  call.send_counts = send_counts;
  call.send_offsets =
      offsets_or_packed(send_counts, send_offsets, world, spacked);
  call.recv_counts = recv_counts;
  call.recv_offsets =
      offsets_or_packed(recv_counts, recv_offsets, world, rpacked);
  run(ctx, mem, call, [&](Backend &b) {
    b.alltoallv(send, send_counts, call.send_offsets, recv, recv_counts,
                call.recv_offsets, dtype);
  });
}

void broadcast(hb_context &ctx, Memory mem, const void *send, void *recv,
               size_t count, hb_dtype dtype, int root) {
  timeline::Span span("broadcast", "comm", bytes_of(count, dtype));
  auto call =
      device_call(gpu::CollectiveCall::kBroadcast, send, recv, count, dtype);
  call.root = root;
  run(ctx, mem, call,
      [&](Backend &b) { b.broadcast(send, recv, count, dtype, root); });
}

void reduce_scatter(hb_context &ctx, Memory mem, const void *send, void *recv,
                    size_t recv_count, hb_dtype dtype, hb_reduce_op op) {
  timeline::Span span(
      "reduce_scatter", "comm",
      bytes_of(recv_count * static_cast<size_t>(ctx.cluster.world_size),
               dtype));
  auto call = device_call(gpu::CollectiveCall::kReduceScatter, send, recv,
                          recv_count, dtype);
  call.op = op;
  run(ctx, mem, call,
      [&](Backend &b) { b.reduce_scatter(send, recv, recv_count, dtype, op); });
}

}  // namespace comm
}  // namespace hb
