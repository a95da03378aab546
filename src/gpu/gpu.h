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

// The calls that need the context (run_collective, context_state,
// set_stream, synchronize) are in context/context_gpu.h: the context lies
// above gpu/.

}  // namespace gpu
}  // namespace hb
