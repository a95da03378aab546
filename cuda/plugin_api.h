/*
 * The ABI between libhb.so and its CUDA plugin (libhb_cuda.so). The core
 * dlopen()s the plugin on first GPU use and calls hb_cuda_plugin_entry(),
 * which returns a table of C function pointers. Plain C so both sides can be
 * built by different compilers (g++ and nvcc). Append-only: the core checks
 * abi_version and struct_size before using a member.
 */
#ifndef HB_CUDA_PLUGIN_API_H
#define HB_CUDA_PLUGIN_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HB_CUDA_PLUGIN_ABI_VERSION 1

typedef struct hb_cuda_plugin {
  uint32_t abi_version; /* HB_CUDA_PLUGIN_ABI_VERSION */
  size_t struct_size;   /* sizeof(hb_cuda_plugin) as built */
  int32_t cuda_runtime_version; /* e.g. 13000 */
  int32_t nccl_version;         /* e.g. 22703; 0 without NCCL */

  /* Each returns 0 on success or an hb_status, with a message in errbuf. */
  int32_t (*device_count)(int32_t *count, char *errbuf, size_t errcap);
  /* *is_device = 1 when p is CUDA device (or managed) memory. */
  int32_t (*pointer_is_device)(const void *p, int32_t *is_device, char *errbuf,
                               size_t errcap);
} hb_cuda_plugin;

typedef const hb_cuda_plugin *(*hb_cuda_plugin_entry_fn)(void);
#define HB_CUDA_PLUGIN_ENTRY "hb_cuda_plugin_entry"

#ifdef __cplusplus
}
#endif
#endif
