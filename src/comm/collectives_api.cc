// The collective entry points of hb.h: check the context's health, validate
// the arguments, then route by buffer location: CUDA buffers to the NCCL
// path (src/gpu), host buffers to the context's CPU backend.
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "abi/error.h"
#include "comm/backend.h"
#include "comm/fusion.h"
#include "comm/validate.h"
#include "context/context.h"
#include "gpu/gpu.h"
#include "rendezvous/client.h"
#include "rendezvous/server.h"

namespace hb {
namespace comm {
namespace {

std::string gloo_host(const hb_context &ctx) {
  std::string host = ctx.options.get_string("cpu_host");
  if (!host.empty()) return host;
  const std::string &rv = ctx.cluster.rendezvous;
  std::string rv_host = rv.substr(0, rv.rfind(':'));
  if (rv_host.empty() || rv_host == "localhost" ||
      rv_host.rfind("127.", 0) == 0)
    return "127.0.0.1";
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) == 0 && name[0]) return name;
  return "127.0.0.1";
}

Backend &cpu(hb_context &ctx) {
  if (ctx.cpu_comm) return *ctx.cpu_comm;
  BackendConfig cfg;
  cfg.rank = ctx.cluster.rank;
  cfg.world_size = ctx.cluster.world_size;
  cfg.timeout_ms = ctx.timeout_ms();
  cfg.peer_report_grace_ms =
      std::min<int64_t>(ctx.options.get_int("peer_timeout_ms") * 2, 10000);
  cfg.hostname = gloo_host(ctx);
  cfg.allreduce_algorithm = ctx.options.get_string("cpu_allreduce");
  cfg.piece_bytes = ctx.options.get_int("cpu_piece_bytes");
  cfg.one_round_bytes = ctx.options.get_int("cpu_one_round_bytes");
  cfg.staged_bytes = ctx.options.get_int("cpu_staged_bytes");
  cfg.transport = ctx.options.get_string("cpu_transport");
  cfg.check_calls = ctx.options.get_int("cpu_check_calls") != 0;
  rdv::KV *kv = ctx.client.get();
  ctx.cpu_comm = make_backend(cfg, kv, ctx.health);
  return *ctx.cpu_comm;
}

// Validated context whose collectives may run.
hb_context &use(hb_context *ctx) {
  hb_context &c = ctx_ref(ctx);
  c.check();
  return c;
}

// True when the buffers are CUDA memory; a mix of host and device is an
// argument error.
bool on_device(const char *fn, const void *send, const void *recv) {
  bool s = send && gpu::is_device_pointer(send);
  bool r = recv && gpu::is_device_pointer(recv);
  HB_CHECK_ARG(s == r || !send || !recv,
               "%s: send is %s memory but recv is %s memory", fn,
               s ? "CUDA" : "host", r ? "CUDA" : "host");
  return s || r;
}

void run_on_device(hb_context &ctx, const gpu::CollectiveCall &call) {
  gpu::run_collective(ctx, call);
}

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

}  // namespace
}  // namespace comm
}  // namespace hb

using hb::comm::check_buffer;
using hb::gpu::CollectiveCall;

extern "C" hb_status hb_allreduce(hb_context *ctx, const void *send, void *recv,
                                  size_t count, hb_dtype dtype,
                                  hb_reduce_op op) {
  return hb::guard([&] {
    const char *fn = "hb_allreduce";
    hb_context &c = hb::comm::use(ctx);
    check_buffer(fn, "send", send, count, dtype);
    check_buffer(fn, "recv", recv, count, dtype);
    hb::comm::check_op(fn, op);
    if (hb::comm::on_device(fn, send, recv)) {
      auto call = hb::comm::device_call(CollectiveCall::kAllreduce, send, recv,
                                        count, dtype);
      call.op = op;
      return hb::comm::run_on_device(c, call);
    }
    hb::comm::cpu(c).allreduce(send, recv, count, dtype, op);
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
    if (device) {  // NCCL: one call per tensor (the plugin fuses on its stream)
      for (size_t i = 0; i < n; ++i) {
        if (!counts[i]) continue;
        auto call = hb::comm::device_call(CollectiveCall::kAllreduce, bufs[i],
                                          bufs[i], counts[i], dtype);
        call.op = op;
        hb::comm::run_on_device(c, call);
      }
      return;
    }
    auto buckets =
        hb::comm::plan_buckets(bufs, counts, n, hb_dtype_size(dtype),
                               c.options.get_int("grad_nbuckets"),
                               c.options.get_int("grad_bucket_bytes"));
    hb::comm::cpu(c).allreduce_buckets(buckets, dtype, op);
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
    if (hb::comm::on_device(fn, send, recv)) {
      auto call = hb::comm::device_call(CollectiveCall::kAllgatherv, send, recv,
                                        send_count, dtype);
      call.recv_counts = recv_counts;
      call.recv_offsets = off.data();
      return hb::comm::run_on_device(c, call);
    }
    hb::comm::cpu(c).allgatherv(send, send_count, recv, recv_counts, off.data(),
                                dtype);
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
    if (hb::comm::on_device(fn, send, recv)) {
      return hb::comm::run_on_device(
          c, hb::comm::device_call(CollectiveCall::kAllgather, send, recv,
                                   count, dtype));
    }
    std::vector<int64_t> counts(world, static_cast<int64_t>(count)), off(world);
    for (int r = 0; r < world; ++r) off[r] = static_cast<int64_t>(count) * r;
    hb::comm::cpu(c).allgatherv(send, count, recv, counts.data(), off.data(),
                                dtype);
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
    size_t es = hb::comm::check_buffer(fn, "send", send, 0, dtype);
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
    if (hb::comm::on_device(fn, sspan ? send : nullptr,
                            rspan ? recv : nullptr)) {
      auto call = hb::comm::device_call(CollectiveCall::kAlltoallv, send, recv,
                                        0, dtype);
      call.send_counts = send_counts;
      call.send_offsets = soff.data();
      call.recv_counts = recv_counts;
      call.recv_offsets = roff.data();
      return hb::comm::run_on_device(c, call);
    }
    hb::comm::cpu(c).alltoallv(send, send_counts, soff.data(), recv,
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
    if (hb::comm::on_device(fn, send, recv)) {
      return hb::comm::run_on_device(
          c, hb::comm::device_call(CollectiveCall::kAlltoall, send, recv, count,
                                   dtype));
    }
    std::vector<int64_t> counts(world, static_cast<int64_t>(count)), off(world);
    for (int r = 0; r < world; ++r) off[r] = static_cast<int64_t>(count) * r;
    hb::comm::cpu(c).alltoallv(send, counts.data(), off.data(), recv,
                               counts.data(), off.data(), dtype);
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
    if (hb::comm::on_device(fn, is_root ? send : nullptr, recv)) {
      auto call = hb::comm::device_call(CollectiveCall::kBroadcast, send, recv,
                                        count, dtype);
      call.root = root;
      return hb::comm::run_on_device(c, call);
    }
    hb::comm::cpu(c).broadcast(send, recv, count, dtype, root);
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
    if (hb::comm::on_device(fn, send, recv)) {
      auto call = hb::comm::device_call(CollectiveCall::kReduceScatter, send,
                                        recv, recv_count, dtype);
      call.op = op;
      return hb::comm::run_on_device(c, call);
    }
    hb::comm::cpu(c).reduce_scatter(send, recv, recv_count, dtype, op);
  });
}
