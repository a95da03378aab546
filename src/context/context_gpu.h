// The context's side of the GPU path (defined in context_gpu.cc): the calls
// of gpu/ that need the hb_context (its peers, timeout and GPU state).
// They keep the hb::gpu namespace of the calls they belong with.
#pragma once

#include "gpu/gpu.h"
#include "hb.h"

namespace hb {
namespace gpu {

// Enqueues the call through NCCL on the context's stream (creating the
// context's NCCL communicator on first use, its unique id sent through the
// rendezvous store). Throws HB_ERR_UNSUPPORTED / HB_ERR_DEVICE /
// HB_ERR_PEER_FAILED; never blocks forever.
void run_collective(hb_context &ctx, const CollectiveCall &call);
struct ContextState;
// The context's GPU state, created on first use (device chosen by the
// context's device option). `what` names the public call in the
// HB_ERR_UNSUPPORTED raised without CUDA or a device.
ContextState &context_state(hb_context &ctx, const char *what);
// hb_context_set_cuda_stream / hb_context_synchronize.
void set_stream(hb_context &ctx, void *stream);
void synchronize(hb_context &ctx);

}  // namespace gpu
}  // namespace hb
