// DeviceOps over the CUDA plugin and NCCL, on the context's GPU state (its
// device, its stream, its communicator): every wait is the state's bounded,
// health-aware synchronize.
#include "abi/error.h"
#include "comm/communicator.h"
#include "common/log.h"
#include "context/context.h"
#include "context/context_gpu.h"
#include "embedding/device_ops.h"
#include "gpu/context_state.h"
#include "gpu/plugin_call.h"

namespace hb {
namespace emb {
namespace {

class GpuOps : public DeviceOps {
 public:
  GpuOps(hb_context &ctx, gpu::ContextState &st)
      : ctx_(ctx), st_(st), p_(st.plugin()) {}

  int device() const override { return st_.device(); }
  void make_current() override {
    gpu::plugin_call("cudaSetDevice", p_.set_device, st_.device());
  }
  bool is_device(const void *p) override { return gpu::is_device_pointer(p); }

  void *alloc(size_t bytes) override {
    void *p = nullptr;
    std::string what =
        format("embedding table: %zu bytes on device %d", bytes, st_.device());
    gpu::plugin_call(what.c_str(), p_.device_malloc, &p, bytes);
    return p;
  }
  void free(void *p) override {
    std::string msg;
    if (gpu::plugin_try(&msg, p_.device_free, p) != HB_OK)
      HB_LOG_WARN("embedding table: cudaFree on device %d: %s", st_.device(),
                  msg.c_str());
  }
  void copy(void *dst, const void *src, size_t bytes) override {
    gpu::plugin_call("embedding table: cudaMemcpyAsync", p_.memcpy_async, dst,
                     src, bytes, st_.stream());
  }
  void sync() override { st_.synchronize(ctx_.timeout_ms()); }

  void gather(const float *table, int64_t table_rows, int64_t row_stride,
              int64_t dim, const int64_t *rows, size_t n, float *out) override {
    gpu::plugin_call("emb_gather", p_.emb_gather, table, table_rows, row_stride,
                     dim, rows, n, out, st_.stream());
  }
  void segment_sum(const float *grads, int64_t dim, const int64_t *order,
                   const int64_t *seg, const int64_t *num_unique,
                   size_t max_segments, float *out) override {
    gpu::plugin_call("emb_segment_sum", p_.emb_segment_sum, grads, dim, order,
                     seg, num_unique, max_segments, out, st_.stream());
  }
  void apply(const hb_cuda_optimizer &opt, float *records, int64_t record_words,
             int64_t table_rows, int64_t dim, const int64_t *rows,
             const int64_t *num_rows, size_t max_rows,
             const float *grads) override {
    gpu::plugin_call("emb_apply", p_.emb_apply, &opt, records, record_words,
                     table_rows, dim, rows, num_rows, max_rows, grads,
                     st_.stream());
  }
  void wire_encode(const float *src, size_t n, hb_dtype dtype,
                   uint16_t *dst) override {
    gpu::plugin_call("emb_wire_encode", p_.emb_wire_encode, src, n,
                     static_cast<int32_t>(dtype), dst, st_.stream());
  }
  void wire_decode(const uint16_t *src, size_t n, hb_dtype dtype,
                   float *dst) override {
    gpu::plugin_call("emb_wire_decode", p_.emb_wire_decode, src, n,
                     static_cast<int32_t>(dtype), dst, st_.stream());
  }
  void dedup(const int64_t *ids, size_t n, int64_t *unique, int64_t *inverse,
             int64_t *num_unique, int64_t *order, int64_t *seg) override {
    gpu::plugin_call("emb_dedup", p_.emb_dedup, ids, n, unique, inverse,
                     num_unique, order, seg, st_.stream());
  }
  void first_occurrence(const int64_t *ids, size_t n, const int64_t *inverse,
                        const int64_t *order, const int64_t *seg,
                        int64_t *unique, int64_t *first_inverse) override {
    gpu::plugin_call("emb_first_occurrence", p_.emb_first_occurrence, ids, n,
                     inverse, order, seg, unique, first_inverse, st_.stream());
  }
  void partition(const int64_t *ids, size_t n, const int64_t *num_ids,
                 int32_t world, int32_t mode, int64_t rows_per_shard,
                 int32_t *owner, int64_t *counts, int64_t *order) override {
    gpu::plugin_call("emb_partition_bounded", p_.emb_partition_bounded, ids, n,
                     num_ids, world, mode, rows_per_shard, owner, counts, order,
                     st_.stream());
  }
  void send_slots(const int64_t *unique, const int64_t *order,
                  const int64_t *num_unique, const int64_t *inverse, size_t n,
                  int64_t *send_ids, int64_t *slots) override {
    gpu::plugin_call("emb_send_slots", p_.emb_send_slots, unique, order,
                     num_unique, inverse, n, send_ids, slots, st_.stream());
  }
  void find_out_of_range(const int64_t *ids, size_t n, int64_t num_rows,
                         int64_t *first_bad) override {
    gpu::plugin_call("emb_find_out_of_range", p_.emb_find_out_of_range, ids, n,
                     num_rows, first_bad, st_.stream());
  }
  void local_rows(const int64_t *ids, size_t n, const int64_t *num_ids,
                  int32_t world, int32_t mode, int64_t rows_per_shard,
                  int64_t *rows) override {
    gpu::plugin_call("emb_local_rows", p_.emb_local_rows, ids, n, num_ids,
                     world, mode, rows_per_shard, rows, st_.stream());
  }
  void idmap_build(int64_t *keys, int64_t *vals, int64_t capacity,
                   const int64_t *row_ids, int64_t rows) override {
    gpu::plugin_call("emb_idmap_build", p_.emb_idmap_build, keys, vals,
                     capacity, row_ids, rows, st_.stream());
  }
  void idmap_assign(int64_t *keys, int64_t *vals, int64_t capacity,
                    const int64_t *ids, size_t n, const int64_t *num_ids,
                    int64_t *row_ids, int64_t row_capacity, int64_t *num_rows,
                    int64_t *first_new, int64_t *out_rows) override {
    gpu::plugin_call("emb_idmap_assign", p_.emb_idmap_assign, keys, vals,
                     capacity, ids, n, num_ids, row_ids, row_capacity, num_rows,
                     first_new, out_rows, st_.stream());
  }
  void init_rows(const hb_cuda_init &init, float *records, int64_t record_words,
                 int64_t table_rows, const int64_t *row_ids,
                 const int64_t *first_row, const int64_t *end_row,
                 size_t max_rows) override {
    gpu::plugin_call("emb_init_rows", p_.emb_init_rows, &init, records,
                     record_words, table_rows, row_ids, first_row, end_row,
                     max_rows, st_.stream());
  }
  void bags(const int64_t *offsets, const int64_t *lengths, int64_t batch,
            int64_t *bag, int64_t *info) override {
    HB_GPU_REQUIRE_MEMBER(&p_, emb_bags);  // appended: checked at first use
    gpu::plugin_call("emb_bags", p_.emb_bags, offsets, lengths, batch, bag,
                     info, st_.stream());
  }
  void pool(const float *rows, int64_t dim, const int64_t *slot, const float *w,
            size_t n, const int64_t *bag, int64_t batch, int32_t pooling,
            float *out, int64_t out_stride) override {
    HB_GPU_REQUIRE_MEMBER(&p_, emb_pool);  // appended: checked at first use
    gpu::plugin_call("emb_pool", p_.emb_pool, rows, dim, slot, w, n, bag, batch,
                     pooling, out, out_stride, st_.stream());
  }
  void expand_grads(const float *grad, int64_t grad_stride, int64_t dim,
                    const float *w, size_t n, const int64_t *bag, int64_t batch,
                    int32_t pooling, float *out) override {
    HB_GPU_REQUIRE_MEMBER(&p_,
                          emb_expand_grads);  // appended: checked at first use
    gpu::plugin_call("emb_expand_grads", p_.emb_expand_grads, grad, grad_stride,
                     dim, w, n, bag, batch, pooling, out, st_.stream());
  }
  void ids_equal(const int64_t *a, const int64_t *b, size_t n,
                 int64_t *differ) override {
    HB_GPU_REQUIRE_MEMBER(&p_,
                          emb_ids_equal);  // appended: checked at first use
    gpu::plugin_call("emb_ids_equal", p_.emb_ids_equal, a, b, n, differ,
                     st_.stream());
  }
  void alltoallv(const void *send, const int64_t *send_bytes, void *recv,
                 const int64_t *recv_bytes) override {
    comm::alltoallv(ctx_, comm::Memory::kCuda, send, send_bytes, nullptr, recv,
                    recv_bytes, nullptr, HB_UINT8);
  }

 private:
  hb_context &ctx_;
  gpu::ContextState &st_;
  const hb_cuda_plugin &p_;
};

}  // namespace

std::unique_ptr<DeviceOps> make_gpu_ops(hb_context &ctx, int device,
                                        hb_dtype wire, const char *what) {
  gpu::ContextState &st = gpu::context_state(ctx, what);
  const hb_cuda_plugin &p = st.plugin();
  HB_GPU_REQUIRE_MEMBER(&p, device_malloc);
  HB_GPU_REQUIRE_MEMBER(&p, device_free);
  HB_GPU_REQUIRE_MEMBER(&p, memcpy_async);
  HB_GPU_REQUIRE_MEMBER(&p, emb_gather);
  HB_GPU_REQUIRE_MEMBER(&p, emb_segment_sum);
  HB_GPU_REQUIRE_MEMBER(&p, emb_apply);
  HB_GPU_REQUIRE_MEMBER(&p, emb_dedup);
  HB_GPU_REQUIRE_MEMBER(&p, emb_first_occurrence);
  HB_GPU_REQUIRE_MEMBER(&p, emb_partition_bounded);
  HB_GPU_REQUIRE_MEMBER(&p, emb_send_slots);
  HB_GPU_REQUIRE_MEMBER(&p, emb_find_out_of_range);
  HB_GPU_REQUIRE_MEMBER(&p, emb_local_rows);
  HB_GPU_REQUIRE_MEMBER(&p, emb_idmap_build);
  HB_GPU_REQUIRE_MEMBER(&p, emb_idmap_assign);
  HB_GPU_REQUIRE_MEMBER(&p, emb_init_rows);
  if (wire != HB_FLOAT32) {
    HB_GPU_REQUIRE_MEMBER(&p, emb_wire_encode);
    HB_GPU_REQUIRE_MEMBER(&p, emb_wire_decode);
  }
  if (device != st.device())
    fail(HB_ERR_INVALID_ARGUMENT,
         "%s: device %d, but the context's CUDA device is %d (a table lives "
         "on its context's device: set the context's device option to "
         "'cuda:%d' or the table's device to %d)",
         what, device, st.device(), device, st.device());
  return std::unique_ptr<DeviceOps>(new GpuOps(ctx, st));
}

}  // namespace emb
}  // namespace hb
