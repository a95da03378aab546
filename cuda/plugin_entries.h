// The functions behind the table of plugin_api.h, one group per file:
// runtime.cu (devices, streams, memory), nccl_ops.cu, embedding_kernels.cu,
// plan_kernels.cu, auc_histogram.cu, id_map_kernels.cu. plugin.cu puts them
// in the table.
#pragma once

#include <cstddef>
#include <cstdint>

#include "plugin_api.h"

namespace hb_cuda {

// runtime.cu
int32_t device_count(int32_t *count, char *errbuf, size_t errcap);
int32_t pointer_is_device(const void *p, int32_t *is_device, char *errbuf,
                          size_t errcap);
int32_t set_device(int32_t device, char *errbuf, size_t errcap);
int32_t stream_create(void **stream, char *errbuf, size_t errcap);
int32_t stream_destroy(void *stream, char *errbuf, size_t errcap);
int32_t stream_query(void *stream, int32_t *done, char *errbuf, size_t errcap);
int32_t device_malloc(void **ptr, size_t bytes, char *errbuf, size_t errcap);
int32_t device_free(void *ptr, char *errbuf, size_t errcap);
int32_t memcpy_async(void *dst, const void *src, size_t bytes, void *stream,
                     char *errbuf, size_t errcap);
int32_t memset_async(void *dst, int32_t value, size_t bytes, void *stream,
                     char *errbuf, size_t errcap);
int32_t divide_async(void *buf, size_t count, int32_t dtype, int64_t divisor,
                     void *stream, char *errbuf, size_t errcap);

// nccl_ops.cu
int32_t nccl_get_unique_id(uint8_t id[HB_CUDA_NCCL_ID_BYTES], char *errbuf,
                           size_t errcap);
int32_t nccl_comm_init(void **comm, int32_t nranks, int32_t rank,
                       const uint8_t id[HB_CUDA_NCCL_ID_BYTES], char *errbuf,
                       size_t errcap);
int32_t nccl_comm_poll(void *comm, int32_t *in_progress, char *errbuf,
                       size_t errcap);
int32_t nccl_comm_abort(void *comm, char *errbuf, size_t errcap);
int32_t nccl_comm_finalize(void *comm, char *errbuf, size_t errcap);
int32_t nccl_comm_destroy(void *comm, char *errbuf, size_t errcap);
int32_t nccl_collective(void *comm, void *stream,
                        const hb_cuda_collective *call, int32_t *in_progress,
                        char *errbuf, size_t errcap);

// embedding_kernels.cu
int32_t emb_partition(const int64_t *ids, size_t n, int32_t world, int32_t mode,
                      int64_t rows_per_shard, int32_t *owner, int64_t *counts,
                      int64_t *order, void *stream, char *errbuf,
                      size_t errcap);
int32_t emb_dedup(const int64_t *ids, size_t n, int64_t *unique,
                  int64_t *inverse, int64_t *num_unique, int64_t *order,
                  int64_t *seg, void *stream, char *errbuf, size_t errcap);
int32_t emb_gather(const float *table, int64_t table_rows, int64_t row_stride,
                   int64_t dim, const int64_t *rows, size_t n, float *out,
                   void *stream, char *errbuf, size_t errcap);
int32_t emb_segment_sum(const float *grads, int64_t dim, const int64_t *order,
                        const int64_t *seg, const int64_t *num_unique,
                        size_t max_segments, float *out, void *stream,
                        char *errbuf, size_t errcap);
int32_t emb_apply(const hb_cuda_optimizer *opt, float *records,
                  int64_t record_words, int64_t table_rows, int64_t dim,
                  const int64_t *rows, const int64_t *num_rows, size_t max_rows,
                  const float *grads, void *stream, char *errbuf,
                  size_t errcap);
int32_t emb_wire_encode(const float *src, size_t n, int32_t dtype,
                        uint16_t *dst, void *stream, char *errbuf,
                        size_t errcap);
int32_t emb_wire_decode(const uint16_t *src, size_t n, int32_t dtype,
                        float *dst, void *stream, char *errbuf, size_t errcap);

int32_t emb_partition_bounded(const int64_t *ids, size_t n,
                              const int64_t *num_ids, int32_t world,
                              int32_t mode, int64_t rows_per_shard,
                              int32_t *owner, int64_t *counts, int64_t *order,
                              void *stream, char *errbuf, size_t errcap);

// plan_kernels.cu
int32_t emb_first_occurrence(const int64_t *ids, size_t n,
                             const int64_t *inverse, const int64_t *order,
                             const int64_t *seg, int64_t *unique,
                             int64_t *first_inverse, void *stream, char *errbuf,
                             size_t errcap);
int32_t emb_send_slots(const int64_t *unique, const int64_t *order,
                       const int64_t *num_unique, const int64_t *inverse,
                       size_t n, int64_t *send_ids, int64_t *slots,
                       void *stream, char *errbuf, size_t errcap);
int32_t emb_find_out_of_range(const int64_t *ids, size_t n, int64_t num_rows,
                              int64_t *first_bad, void *stream, char *errbuf,
                              size_t errcap);
int32_t emb_local_rows(const int64_t *ids, size_t n, const int64_t *num_ids,
                       int32_t world, int32_t mode, int64_t rows_per_shard,
                       int64_t *rows, void *stream, char *errbuf,
                       size_t errcap);

// collection_kernels.cu
int32_t emb_bags(const int64_t *offsets, const int64_t *lengths, int64_t batch,
                 int64_t *bag, int64_t *info, void *stream, char *errbuf,
                 size_t errcap);
int32_t emb_pool(const float *rows, int64_t dim, const int64_t *slot,
                 const float *weights, size_t n, const int64_t *bag,
                 int64_t batch, int32_t pooling, float *out, int64_t out_stride,
                 void *stream, char *errbuf, size_t errcap);
int32_t emb_expand_grads(const float *grad, int64_t grad_stride, int64_t dim,
                         const float *weights, size_t n, const int64_t *bag,
                         int64_t batch, int32_t pooling, float *out,
                         void *stream, char *errbuf, size_t errcap);
int32_t emb_ids_equal(const int64_t *a, const int64_t *b, size_t n,
                      int64_t *differ, void *stream, char *errbuf,
                      size_t errcap);

// auc_histogram.cu
int32_t auc_histogram(const float *labels, const float *preds,
                      const float *weights, size_t n, const float *thresholds,
                      int32_t nthresh, uint64_t *pos, uint64_t *neg,
                      double *wpos, double *wneg, void *stream, char *errbuf,
                      size_t errcap);

// id_map_kernels.cu
int32_t emb_idmap_build(int64_t *keys, int64_t *vals, int64_t capacity,
                        const int64_t *row_ids, int64_t rows, void *stream,
                        char *errbuf, size_t errcap);
int32_t emb_idmap_assign(int64_t *keys, int64_t *vals, int64_t capacity,
                         const int64_t *ids, size_t n, const int64_t *num_ids,
                         int64_t *row_ids, int64_t row_capacity,
                         int64_t *num_rows, int64_t *first_new,
                         int64_t *out_rows, void *stream, char *errbuf,
                         size_t errcap);
int32_t emb_init_rows(const hb_cuda_init *init, float *records,
                      int64_t record_words, int64_t table_rows,
                      const int64_t *row_ids, const int64_t *first_row,
                      const int64_t *end_row, size_t max_rows, void *stream,
                      char *errbuf, size_t errcap);

}  // namespace hb_cuda
