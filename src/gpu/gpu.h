// The core's side of the CUDA plugin: loads libhb_cuda.so with dlopen on
// first use, so libhb.so itself never depends on libcudart or libnccl.
#pragma once

#include <cstdint>
#include <string>

#include "hb.h"
#include "plugin_api.h"

namespace hb {
namespace gpu {

// The plugin, loaded once (thread-safe); nullptr if unavailable, with the
// reason in *why (may be NULL).
const hb_cuda_plugin *plugin(std::string *why);
// Throws HB_ERR_UNSUPPORTED naming what is missing.
const hb_cuda_plugin &require_plugin();
// False without a plugin or driver (so host pointers never need CUDA).
bool is_device_pointer(const void *p);
// 0 without a plugin or driver.
int device_count();
// "cuda_plugin=built; cuda_plugin_loaded=no(libcuda.so.1: not found)".
std::string describe();

// A collective on CUDA buffers, already validated by src/comm (counts,
// dtype, op, root). Routed here when is_device_pointer(send or recv).
struct CollectiveCall {
  enum Kind {
    kAllreduce,
    kAllgather,
    kAllgatherv,
    kAlltoall,
    kAlltoallv,
    kBroadcast,
    kReduceScatter
  } kind;
  const void *send = nullptr;
  void *recv = nullptr;
  size_t count = 0;  // elements (per rank / per peer as in hb.h)
  hb_dtype dtype = HB_FLOAT32;
  hb_reduce_op op = HB_SUM;
  int root = 0;
  const int64_t *send_counts = nullptr, *send_offsets = nullptr;
  const int64_t *recv_counts = nullptr, *recv_offsets = nullptr;
};

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
