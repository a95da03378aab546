// The hb_context entry points of the GPU path (context_gpu.h): they find or
// create the context's ContextState and hand it its peers and timeout.
#include "context/context_gpu.h"

#include "abi/error.h"
#include "context/context.h"
#include "gpu/context_state.h"
#include "rendezvous/client.h"
#include "rendezvous/server.h"
#include "timeline/timeline.h"

namespace hb {
namespace gpu {
ContextState &context_state(hb_context &ctx, const char *what) {
  if (ctx.gpu) return *ctx.gpu;
  std::string why;
  const hb_cuda_plugin *p = plugin(&why);
  if (!p)
    fail(HB_ERR_UNSUPPORTED, "%s: CUDA is not available: %s", what,
         why.c_str());
  int n = device_count();
  if (n <= 0)
    fail(HB_ERR_UNSUPPORTED, "%s: no CUDA device is visible to this process",
         what);
  int device = pick_device(ctx.device, ctx.cluster.local_rank, n);
  ctx.gpu = std::make_shared<ContextState>(*p, device, &ctx.health);
  return *ctx.gpu;
}

void run_collective(hb_context &ctx, const CollectiveCall &call) {
  ctx.check();
  Peers peers;
  peers.rank = ctx.cluster.rank;
  peers.world = ctx.cluster.world_size;
  ensure_world(ctx);  // parameter-server mode: formed on first use
  peers.kv = ctx.client.get();
  peers.scope = ctx.scope;
  context_state(ctx, "GPU collective")
      .collective(call, peers, ctx.timeout_ms());
}

void set_stream(hb_context &ctx, void *stream) {
  ctx.check();
  context_state(ctx, "hb_context_set_cuda_stream")
      .set_stream(stream, ctx.timeout_ms());
}

void synchronize(hb_context &ctx) {
  if (!ctx.gpu) return;  // no CUDA, or nothing was ever enqueued
  timeline::Span span("cuda_synchronize", "gpu");
  ctx.gpu->synchronize(ctx.timeout_ms());
}

}  // namespace gpu
}  // namespace hb
