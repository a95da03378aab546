// Entry point of the CUDA plugin: fills the function table of plugin_api.h.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>

#include "hb.h"
#include "plugin_api.h"

namespace {

int32_t report(cudaError_t e, const char *what, char *errbuf, size_t errcap) {
  if (e == cudaSuccess) return HB_OK;
  std::snprintf(errbuf, errcap, "%s: %s", what, cudaGetErrorString(e));
  cudaGetLastError();  // clear the sticky-free error so later calls work
  return HB_ERR_DEVICE;
}

int32_t device_count(int32_t *count, char *errbuf, size_t errcap) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  *count = e == cudaSuccess ? n : 0;
  return report(e, "cudaGetDeviceCount", errbuf, errcap);
}

int32_t pointer_is_device(const void *p, int32_t *is_device, char *errbuf, size_t errcap) {
  cudaPointerAttributes attr;
  cudaError_t e = cudaPointerGetAttributes(&attr, p);
  *is_device = e == cudaSuccess &&
               (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged);
  return report(e, "cudaPointerGetAttributes", errbuf, errcap);
}

hb_cuda_plugin make_table() {
  hb_cuda_plugin t = {};
  t.abi_version = HB_CUDA_PLUGIN_ABI_VERSION;
  t.struct_size = sizeof(hb_cuda_plugin);
  int rt = 0;
  cudaRuntimeGetVersion(&rt);
  t.cuda_runtime_version = rt;
  int nv = 0;
  ncclGetVersion(&nv);
  t.nccl_version = nv;
  t.device_count = device_count;
  t.pointer_is_device = pointer_is_device;
  return t;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const hb_cuda_plugin *hb_cuda_plugin_entry(void) {
  static const hb_cuda_plugin table = make_table();
  return &table;
}
