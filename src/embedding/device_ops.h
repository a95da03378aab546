// The device operations a GPU table's step is made of. DeviceTable
// (device_table.h) orchestrates a step over this narrow interface; the
// production implementation (gpu_ops.cc) runs each operation through the
// CUDA plugin and NCCL on the context's stream, and the tests run the very
// same orchestration over a host implementation with the same semantics
// (tests/embedding/host_device_ops.h).
//
// Semantics every implementation keeps (those of cuda/plugin_api.h):
// - operations are enqueued in call order on one stream and may run later;
//   sync() waits (bounded, health-aware) until all of them finished;
// - copy() reads a host source before it returns (as cudaMemcpyAsync from
//   pageable memory does), so host buffers may be reused at once; a device
//   to host copy is complete only after sync();
// - "device" pointers come from alloc() or are the caller's device buffers
//   (is_device()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "hb.h"
#include "plugin_api.h"

namespace hb {
namespace emb {

class DeviceOps {
 public:
  virtual ~DeviceOps() = default;
  virtual int device() const = 0;
  // Selects the device on the calling thread (called at every entry).
  virtual void make_current() = 0;
  virtual bool is_device(const void *p) = 0;

  virtual void *alloc(size_t bytes) = 0;  // bytes > 0
  // Frees after the work enqueued so far (may wait, bounded).
  virtual void free(void *p) = 0;
  virtual void copy(void *dst, const void *src, size_t bytes) = 0;
  virtual void sync() = 0;

  // The plugin's emb_gather, emb_segment_sum and emb_apply.
  virtual void gather(const float *table, int64_t table_rows,
                      int64_t row_stride, int64_t dim, const int64_t *rows,
                      size_t n, float *out) = 0;
  virtual void segment_sum(const float *grads, int64_t dim,
                           const int64_t *order, const int64_t *seg,
                           const int64_t *num_unique, size_t max_segments,
                           float *out) = 0;
  virtual void apply(const hb_cuda_optimizer &opt, float *records,
                     int64_t record_words, int64_t table_rows, int64_t dim,
                     const int64_t *rows, const int64_t *num_rows,
                     size_t max_rows, const float *grads) = 0;
  // The plugin's emb_wire_encode / emb_wire_decode: n floats to and from
  // float16 / bfloat16 bits (round to nearest even).
  virtual void wire_encode(const float *src, size_t n, hb_dtype dtype,
                           uint16_t *dst) = 0;
  virtual void wire_decode(const uint16_t *src, size_t n, hb_dtype dtype,
                           float *dst) = 0;
  // The step plan's kernels (see device_plan.h): the plugin's emb_dedup
  // (unique and inverse may be NULL), emb_first_occurrence,
  // emb_partition_bounded (num_ids: device count or NULL), emb_send_slots,
  // emb_find_out_of_range and emb_local_rows.
  virtual void dedup(const int64_t *ids, size_t n, int64_t *unique,
                     int64_t *inverse, int64_t *num_unique, int64_t *order,
                     int64_t *seg) = 0;
  virtual void first_occurrence(const int64_t *ids, size_t n,
                                const int64_t *inverse, const int64_t *order,
                                const int64_t *seg, int64_t *unique,
                                int64_t *first_inverse) = 0;
  virtual void partition(const int64_t *ids, size_t n, const int64_t *num_ids,
                         int32_t world, int32_t mode, int64_t rows_per_shard,
                         int32_t *owner, int64_t *counts, int64_t *order) = 0;
  virtual void send_slots(const int64_t *unique, const int64_t *order,
                          const int64_t *num_unique, const int64_t *inverse,
                          size_t n, int64_t *send_ids, int64_t *slots) = 0;
  virtual void find_out_of_range(const int64_t *ids, size_t n, int64_t num_rows,
                                 int64_t *first_bad) = 0;
  virtual void local_rows(const int64_t *ids, size_t n, const int64_t *num_ids,
                          int32_t world, int32_t mode, int64_t rows_per_shard,
                          int64_t *rows) = 0;
  // The device id -> row map of dynamic tables (device_id_map.h): the
  // plugin's emb_idmap_build, emb_idmap_assign and emb_init_rows.
  virtual void idmap_build(int64_t *keys, int64_t *vals, int64_t capacity,
                           const int64_t *row_ids, int64_t rows) = 0;
  virtual void idmap_assign(int64_t *keys, int64_t *vals, int64_t capacity,
                            const int64_t *ids, size_t n,
                            const int64_t *num_ids, int64_t *row_ids,
                            int64_t row_capacity, int64_t *num_rows,
                            int64_t *first_new, int64_t *out_rows) = 0;
  virtual void init_rows(const hb_cuda_init &init, float *records,
                         int64_t record_words, int64_t table_rows,
                         const int64_t *row_ids, const int64_t *first_row,
                         const int64_t *end_row, size_t max_rows) = 0;
  // Collective over the table's ranks, device buffers packed in rank order
  // (bytes per peer, host arrays), ordered on the stream.
  virtual void alltoallv(const void *send, const int64_t *send_bytes,
                         void *recv, const int64_t *recv_bytes) = 0;

  // A collection's kernels (device_collection.h): the plugin's emb_bags,
  // emb_pool, emb_expand_grads and emb_ids_equal (cuda/plugin_api.h).
  // bags: one feature's bag bounds from offsets (batch + 1) or, offsets
  // NULL, lengths (batch): bag[b] relative to the first id (batch + 1
  // entries) and info = {id count, offsets[0] (0 with lengths), error,
  // sample, value}, error 0 (none), 1 (offsets[0] = value < 0), 2 (offsets
  // decrease at sample), 3 (length value at sample outside [0, 2^32)): the
  // first error in sample order.
  virtual void bags(const int64_t *offsets, const int64_t *lengths,
                    int64_t batch, int64_t *bag, int64_t *info) = 0;
  // pool: rows[slot[k]] (dim floats) is the row of id k of the feature, w
  // its weight (NULL: 1). NONE: out[k * out_stride + c] = w * row, k < n.
  // Else out[b * out_stride + c], b < batch: the bag's weighted rows summed
  // in bag order (the first assigned), divided by the id count (MEAN) or
  // its sqrt (SQRTN); an empty bag is zeros. No FMA contraction.
  virtual void pool(const float *rows, int64_t dim, const int64_t *slot,
                    const float *w, size_t n, const int64_t *bag, int64_t batch,
                    int32_t pooling, float *out, int64_t out_stride) = 0;
  // expand_grads: out (n x dim) = each id's share of its gradient: NONE:
  // grad[k * grad_stride + c] * w[k] (a copy without w); pooled: g =
  // grad[b * grad_stride + c] of its bag b, times w[k] (SUM), or times
  // (w[k] or 1) / count (MEAN) or / sqrt(count) (SQRTN); SUM without w
  // copies.
  virtual void expand_grads(const float *grad, int64_t grad_stride, int64_t dim,
                            const float *w, size_t n, const int64_t *bag,
                            int64_t batch, int32_t pooling, float *out) = 0;
  // ids_equal: *differ = 1 when a[i] != b[i] for some i < n; left as it is
  // otherwise (one flag for several calls).
  virtual void ids_equal(const int64_t *a, const int64_t *b, size_t n,
                         int64_t *differ) = 0;
};

// A device buffer that grows (doubling) on demand; growing waits for the
// work that may still use the old memory.
class DeviceBuf {
 public:
  template <class T>
  T *ensure(DeviceOps &ops, size_t count) {
    return static_cast<T *>(grow(ops, count * sizeof(T)));
  }
  // As ensure, keeping the first `keep` elements when it grows (a wait).
  template <class T>
  T *ensure_keep(DeviceOps &ops, size_t count, size_t keep) {
    return static_cast<T *>(
        grow_keep(ops, count * sizeof(T), keep * sizeof(T)));
  }
  template <class T>
  T *get() const {
    return static_cast<T *>(p_);
  }
  void release(DeviceOps &ops);

 private:
  void *grow(DeviceOps &ops, size_t bytes);
  void *grow_keep(DeviceOps &ops, size_t bytes, size_t keep);
  void *p_ = nullptr;
  size_t bytes_ = 0;
};

// The CUDA plugin + NCCL implementation on the context's GPU state. Throws
// HB_ERR_UNSUPPORTED without CUDA, a device or the plugin functions a table
// with this wire dtype needs, and HB_ERR_INVALID_ARGUMENT when `device` is
// not the context's CUDA device.
std::unique_ptr<DeviceOps> make_gpu_ops(hb_context &ctx, int device,
                                        hb_dtype wire, const char *what);

}  // namespace emb
}  // namespace hb
