// Entry point of the CUDA plugin: fills the function table of plugin_api.h.
#include <cuda_runtime.h>
#include <nccl.h>

#include "plugin_api.h"
#include "plugin_entries.h"

namespace {

hb_cuda_plugin make_table() {
  using namespace hb_cuda;
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
  t.set_device = set_device;
  t.stream_create = stream_create;
  t.stream_destroy = stream_destroy;
  t.stream_query = stream_query;
  t.device_malloc = device_malloc;
  t.device_free = device_free;
  t.memcpy_async = memcpy_async;
  t.memset_async = memset_async;
  t.nccl_get_unique_id = nccl_get_unique_id;
  t.nccl_comm_init = nccl_comm_init;
  t.nccl_comm_poll = nccl_comm_poll;
  t.nccl_comm_abort = nccl_comm_abort;
  t.nccl_comm_finalize = nccl_comm_finalize;
  t.nccl_comm_destroy = nccl_comm_destroy;
  t.nccl_collective = nccl_collective;
  t.divide_async = divide_async;
  t.emb_partition = emb_partition;
  t.emb_dedup = emb_dedup;
  t.emb_gather = emb_gather;
  t.emb_segment_sum = emb_segment_sum;
  t.emb_apply = emb_apply;
  t.auc_histogram = auc_histogram;
  t.emb_wire_encode = emb_wire_encode;
  t.emb_wire_decode = emb_wire_decode;
  t.emb_first_occurrence = emb_first_occurrence;
  t.emb_partition_bounded = emb_partition_bounded;
  t.emb_send_slots = emb_send_slots;
  t.emb_find_out_of_range = emb_find_out_of_range;
  t.emb_local_rows = emb_local_rows;
  t.emb_idmap_build = emb_idmap_build;
  t.emb_idmap_assign = emb_idmap_assign;
  t.emb_init_rows = emb_init_rows;
  t.emb_bags = emb_bags;
  t.emb_pool = emb_pool;
  t.emb_expand_grads = emb_expand_grads;
  t.emb_ids_equal = emb_ids_equal;
  return t;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const hb_cuda_plugin *
hb_cuda_plugin_entry(void) {
  static const hb_cuda_plugin table = make_table();
  return &table;
}
