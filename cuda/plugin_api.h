/*
 * The ABI between libhb.so and its CUDA plugin (libhb_cuda.so). The core
 * dlopen()s the plugin on first GPU use and calls hb_cuda_plugin_entry(),
 * which returns a table of C function pointers. Plain C so both sides can be
 * built by different compilers (g++ and nvcc). Append-only: the core checks
 * abi_version and struct_size before using a member (HB_CUDA_PLUGIN_HAS).
 *
 * Conventions for every function pointer below:
 *  - returns 0 (HB_OK) or an hb_status, with a message in errbuf (errcap
 *    bytes, always NUL-terminated when errcap > 0);
 *  - acts on the calling thread's current CUDA device (set_device first);
 *  - "stream" is a cudaStream_t passed as void *; work is enqueued on it and
 *    the call returns without waiting for the GPU;
 *  - "device" buffers are CUDA device (or managed) memory; "host" arrays are
 *    ordinary memory read before the call returns.
 */
#ifndef HB_CUDA_PLUGIN_API_H
#define HB_CUDA_PLUGIN_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HB_CUDA_PLUGIN_ABI_VERSION 1

/* Bytes of an NCCL unique id (NCCL_UNIQUE_ID_BYTES). */
#define HB_CUDA_NCCL_ID_BYTES 128

/* hb_cuda_collective.kind */
enum hb_cuda_collective_kind {
  HB_CUDA_ALLREDUCE = 0,
  HB_CUDA_ALLGATHER = 1,
  HB_CUDA_ALLGATHERV = 2,
  HB_CUDA_ALLTOALL = 3,
  HB_CUDA_ALLTOALLV = 4,
  HB_CUDA_BROADCAST = 5,
  HB_CUDA_REDUCE_SCATTER = 6
};

/* One collective for nccl_collective. Counts and offsets are in elements;
 * the per-peer arrays are host memory with nranks entries (NULL offsets:
 * packed in rank order). op is an hb_reduce_op; HB_AVG on an integer dtype
 * is refused (the core runs HB_SUM then divide_async, because NCCL's
 * integer average is not C's truncating division on every version). */
typedef struct hb_cuda_collective {
  int32_t kind;  /* hb_cuda_collective_kind */
  int32_t dtype; /* hb_dtype */
  int32_t op;    /* hb_reduce_op */
  int32_t root;
  int32_t rank;
  int32_t nranks;
  const void *send;
  void *recv;
  size_t count;
  const int64_t *send_counts;
  const int64_t *send_offsets;
  const int64_t *recv_counts;
  const int64_t *recv_offsets;
} hb_cuda_collective;

/* embedding partition modes (as hb_partition_code) */
#define HB_CUDA_PARTITION_MOD 0
#define HB_CUDA_PARTITION_DIV 1

/* Optimizer and hyperparameters for emb_apply, as in hb_embedding_config
 * (the kernels round them to float as the CPU code does: see
 * src/embedding/optimizer_math.h). */
typedef struct hb_cuda_optimizer {
  int32_t kind; /* hb_optimizer_code */
  double learning_rate;
  double initial_accumulator;
  double beta1, beta2, epsilon;
  double l1, l2, lr_power;
} hb_cuda_optimizer;

/* What emb_init_rows needs to initialize a dynamic table's new rows as the
 * host does (src/embedding/init_math.h, optimizer_math.h: init_slots). */
typedef struct hb_cuda_init {
  int32_t initializer; /* hb_initializer_code */
  int32_t optimizer;   /* hb_optimizer_code: which slots follow the weights */
  int64_t dim;
  double init_a, init_b;
  uint64_t table_key; /* splitmix64(seed ^ FNV-1a 64 of the table name) */
  double initial_accumulator;
} hb_cuda_init;

typedef struct hb_cuda_plugin {
  uint32_t abi_version;         /* HB_CUDA_PLUGIN_ABI_VERSION */
  size_t struct_size;           /* sizeof(hb_cuda_plugin) as built */
  int32_t cuda_runtime_version; /* e.g. 13000 */
  int32_t nccl_version;         /* e.g. 22703; 0 without NCCL */

  /* Each returns 0 on success or an hb_status, with a message in errbuf. */
  int32_t (*device_count)(int32_t *count, char *errbuf, size_t errcap);
  /* *is_device = 1 when p is CUDA device (or managed) memory. */
  int32_t (*pointer_is_device)(const void *p, int32_t *is_device, char *errbuf,
                               size_t errcap);

  /* ---- Devices, streams, memory ---------------------------------------- */
  int32_t (*set_device)(int32_t device, char *errbuf, size_t errcap);
  /* A non-blocking stream on the current device. */
  int32_t (*stream_create)(void **stream, char *errbuf, size_t errcap);
  int32_t (*stream_destroy)(void *stream, char *errbuf, size_t errcap);
  /* *done = 1 when everything enqueued on stream finished, 0 while work is
   * pending; HB_ERR_DEVICE when that work failed. Never blocks. */
  int32_t (*stream_query)(void *stream, int32_t *done, char *errbuf,
                          size_t errcap);
  int32_t (*device_malloc)(void **ptr, size_t bytes, char *errbuf,
                           size_t errcap);
  int32_t (*device_free)(void *ptr, char *errbuf, size_t errcap);
  /* Any direction (cudaMemcpyDefault), ordered on stream. */
  int32_t (*memcpy_async)(void *dst, const void *src, size_t bytes,
                          void *stream, char *errbuf, size_t errcap);
  int32_t (*memset_async)(void *dst, int32_t value, size_t bytes, void *stream,
                          char *errbuf, size_t errcap);

  /* ---- NCCL (communicators are nonblocking: poll, never wait) ----------- */
  int32_t (*nccl_get_unique_id)(uint8_t id[HB_CUDA_NCCL_ID_BYTES], char *errbuf,
                                size_t errcap);
  /* Starts ncclCommInitRankConfig (blocking = 0) on the current device; the
   * communicator is usable once nccl_comm_poll reports *in_progress == 0. */
  int32_t (*nccl_comm_init)(void **comm, int32_t nranks, int32_t rank,
                            const uint8_t id[HB_CUDA_NCCL_ID_BYTES],
                            char *errbuf, size_t errcap);
  /* ncclCommGetAsyncError: *in_progress = 1 while the last operation is
   * still being set up; HB_ERR_DEVICE on an asynchronous NCCL error. */
  int32_t (*nccl_comm_poll)(void *comm, int32_t *in_progress, char *errbuf,
                            size_t errcap);
  /* ncclCommAbort: frees the communicator, breaking any pending kernel. */
  int32_t (*nccl_comm_abort)(void *comm, char *errbuf, size_t errcap);
  /* Starts ncclCommFinalize (flushes pending work): poll until
   * *in_progress == 0, then nccl_comm_destroy. */
  int32_t (*nccl_comm_finalize)(void *comm, char *errbuf, size_t errcap);
  int32_t (*nccl_comm_destroy)(void *comm, char *errbuf, size_t errcap);
  /* Enqueues one collective (grouped send/recv for the v-variants). When it
   * returns with *in_progress = 1, poll the communicator before the next. */
  int32_t (*nccl_collective)(void *comm, void *stream,
                             const hb_cuda_collective *call,
                             int32_t *in_progress, char *errbuf, size_t errcap);
  /* buf[i] /= divisor for an integer dtype, truncating toward zero. */
  int32_t (*divide_async)(void *buf, size_t count, int32_t dtype,
                          int64_t divisor, void *stream, char *errbuf,
                          size_t errcap);

  /* ---- Embedding kernels (device buffers, enqueued on stream) ----------- */
  /* owner[i] of ids[i]: MOD: (uint64)id % world; DIV: id / rows_per_shard
   * (ids outside [0, world * rows_per_shard) get owner -1).
   * counts[world] (device int64) gets how many ids each owner has, and
   * order[n] (device int64) the input positions grouped by owner, stable
   * (ascending position inside each owner). counts/order may be NULL. */
  int32_t (*emb_partition)(const int64_t *ids, size_t n, int32_t world,
                           int32_t mode, int64_t rows_per_shard, int32_t *owner,
                           int64_t *counts, int64_t *order, void *stream,
                           char *errbuf, size_t errcap);
  /* Sort-based dedup: unique[0..*num_unique) ascending, inverse[i] the
   * index in unique of ids[i]. order (n, may be NULL) gets the input
   * positions sorted by (id, position) and seg (n + 1, may be NULL) the
   * segment starts into order, so that seg[u]..seg[u+1] are the positions of
   * unique[u]. num_unique is a device int64. unique and inverse may be
   * NULL too. */
  int32_t (*emb_dedup)(const int64_t *ids, size_t n, int64_t *unique,
                       int64_t *inverse, int64_t *num_unique, int64_t *order,
                       int64_t *seg, void *stream, char *errbuf, size_t errcap);
  /* out[i, :] = the first dim floats of row rows[i] of table (rows of
   * row_stride floats, row_stride >= dim); a row outside [0, table_rows)
   * gives zeros. */
  int32_t (*emb_gather)(const float *table, int64_t table_rows,
                        int64_t row_stride, int64_t dim, const int64_t *rows,
                        size_t n, float *out, void *stream, char *errbuf,
                        size_t errcap);
  /* Deterministic segment sum: for u < *num_unique (device), out[u, :] =
   * sum of grads[order[j], :] for j in [seg[u], seg[u+1]) in that order
   * (the layout emb_dedup produces). max_segments bounds *num_unique. */
  int32_t (*emb_segment_sum)(const float *grads, int64_t dim,
                             const int64_t *order, const int64_t *seg,
                             const int64_t *num_unique, size_t max_segments,
                             float *out, void *stream, char *errbuf,
                             size_t errcap);
  /* One optimizer step on records rows[0..*num_rows) (unique local row
   * indices, device; *num_rows a device int64, at most max_rows) with grads
   * (num_rows x dim, device). records holds table_rows row records laid out
   * as the CPU shard's (src/embedding/optimizer.h): dim weights, then the
   * optimizer's slots, dim floats each (Adagrad: accumulator; Adam: m, v;
   * FTRL: n, z) and, for Adam, the row's int64 step count in the next two
   * 32-bit words; record_words = hb::optmath::record_words(kind, dim).
   * Rows outside [0, table_rows) are skipped. */
  int32_t (*emb_apply)(const hb_cuda_optimizer *opt, float *records,
                       int64_t record_words, int64_t table_rows, int64_t dim,
                       const int64_t *rows, const int64_t *num_rows,
                       size_t max_rows, const float *grads, void *stream,
                       char *errbuf, size_t errcap);

  /* ---- Metrics ---------------------------------------------------------- */
  /* Thresholded AUC histogram: bucket b of sample i is the number of
   * thresholds t (ascending, host array, nthresh entries) with preds[i] > t.
   * Samples with labels[i] != 0 are positives. pos/neg (device, nthresh + 1
   * uint64) are incremented by the unweighted counts (exact); when weights
   * is not NULL, wpos/wneg (device, nthresh + 1 double) are incremented by
   * the weight sums, summed in input order per bucket (deterministic). */
  int32_t (*auc_histogram)(const float *labels, const float *preds,
                           const float *weights, size_t n,
                           const float *thresholds, int32_t nthresh,
                           uint64_t *pos, uint64_t *neg, double *wpos,
                           double *wneg, void *stream, char *errbuf,
                           size_t errcap);

  /* ---- Embedding wire dtype (appended; check with HB_CUDA_PLUGIN_HAS) --- */
  /* dst[i] = the bits of src[i] rounded to dtype (HB_FLOAT16 or
   * HB_BFLOAT16, round to nearest even, exactly as the host code:
   * src/abi/half_math.h); device buffers of n elements. */
  int32_t (*emb_wire_encode)(const float *src, size_t n, int32_t dtype,
                             uint16_t *dst, void *stream, char *errbuf,
                             size_t errcap);
  /* dst[i] = the float value of the dtype bits src[i] (exact). */
  int32_t (*emb_wire_decode)(const uint16_t *src, size_t n, int32_t dtype,
                             float *dst, void *stream, char *errbuf,
                             size_t errcap);

  /* ---- Device-side step plan (appended; check with HB_CUDA_PLUGIN_HAS) -- */
  /* With emb_dedup's inverse, order and seg of ids[0..n): unique[0..k) gets
   * the distinct ids in first-occurrence order (k = emb_dedup's
   * *num_unique) and first_inverse[i] the index in unique of ids[i]. */
  int32_t (*emb_first_occurrence)(const int64_t *ids, size_t n,
                                  const int64_t *inverse, const int64_t *order,
                                  const int64_t *seg, int64_t *unique,
                                  int64_t *first_inverse, void *stream,
                                  char *errbuf, size_t errcap);
  /* emb_partition over ids[0..min(*num_ids, n)) (num_ids: device int64,
   * NULL for n): positions at or past *num_ids get owner -1, are not
   * counted and sort last in order. */
  int32_t (*emb_partition_bounded)(const int64_t *ids, size_t n,
                                   const int64_t *num_ids, int32_t world,
                                   int32_t mode, int64_t rows_per_shard,
                                   int32_t *owner, int64_t *counts,
                                   int64_t *order, void *stream, char *errbuf,
                                   size_t errcap);
  /* With k = *num_unique (device) and order[0..k) a permutation of [0, k)
   * (emb_partition_bounded's order): send_ids[j] = unique[order[j]] for
   * j < k, and slots[i] = the j with order[j] == inverse[i] for i < n
   * (inverse[i] < k). */
  int32_t (*emb_send_slots)(const int64_t *unique, const int64_t *order,
                            const int64_t *num_unique, const int64_t *inverse,
                            size_t n, int64_t *send_ids, int64_t *slots,
                            void *stream, char *errbuf, size_t errcap);
  /* *first_bad (device int64) = the smallest i with ids[i] outside
   * [0, num_rows), or n when there is none. */
  int32_t (*emb_find_out_of_range)(const int64_t *ids, size_t n,
                                   int64_t num_rows, int64_t *first_bad,
                                   void *stream, char *errbuf, size_t errcap);
  /* rows[i] = the owner's dense row index of ids[i] (MOD: id / world; DIV:
   * id % rows_per_shard) for i < min(*num_ids, n) (num_ids: device int64,
   * NULL for n); later entries are left as they are. */
  int32_t (*emb_local_rows)(const int64_t *ids, size_t n,
                            const int64_t *num_ids, int32_t world, int32_t mode,
                            int64_t rows_per_shard, int64_t *rows, void *stream,
                            char *errbuf, size_t errcap);

  /* ---- Device id -> row map of dynamic tables (appended; check with
   * HB_CUDA_PLUGIN_HAS) ---------------------------------------------------
   * keys and vals: device int64, capacity + 1 slots each (capacity a power
   * of two >= 16; layout: src/embedding/id_map_math.h). row_ids: device
   * int64, row_capacity entries, row r's id. */
  /* Empties the map and inserts row_ids[r] -> r for r < rows (host count;
   * distinct ids, rows <= capacity / 2 for short probes). */
  int32_t (*emb_idmap_build)(int64_t *keys, int64_t *vals, int64_t capacity,
                             const int64_t *row_ids, int64_t rows, void *stream,
                             char *errbuf, size_t errcap);
  /* For i < k = min(*num_ids, n) (num_ids: device int64, NULL for n):
   * out_rows[i] = the row of ids[i]. Ids the map lacks get new rows
   * *num_rows, *num_rows + 1, ... in the order of their first occurrence in
   * ids[0..k) (the host shard's creation order); row_ids gets their ids,
   * *num_rows (device int64) the new count and *first_new (device int64)
   * the count before. When the map or row_ids has no room, *num_rows
   * becomes -1 and the map is unusable until rebuilt (the caller sizes
   * both beforehand; -1 reaches it with the count). */
  int32_t (*emb_idmap_assign)(int64_t *keys, int64_t *vals, int64_t capacity,
                              const int64_t *ids, size_t n,
                              const int64_t *num_ids, int64_t *row_ids,
                              int64_t row_capacity, int64_t *num_rows,
                              int64_t *first_new, int64_t *out_rows,
                              void *stream, char *errbuf, size_t errcap);
  /* Initializes the records of rows r in [*first_row, *end_row) (device
   * int64s, at most max_rows rows, r < table_rows): weights from
   * row_ids[r] as the host initializer, then the optimizer's slots.
   * records: table_rows records of record_words floats (emb_apply's
   * layout). */
  int32_t (*emb_init_rows)(const hb_cuda_init *init, float *records,
                           int64_t record_words, int64_t table_rows,
                           const int64_t *row_ids, const int64_t *first_row,
                           const int64_t *end_row, size_t max_rows,
                           void *stream, char *errbuf, size_t errcap);
  /* ---- Embedding collections (appended; check with HB_CUDA_PLUGIN_HAS) -- */
  /* One feature's bags (src/embedding/device_ops.h, DeviceOps::bags):
   * offsets (batch + 1, device) or, offsets NULL, lengths (batch); bag
   * (batch + 1, device) relative to the first id; info (5 device int64) =
   * {id count, base, error, sample, value}. */
  int32_t (*emb_bags)(const int64_t *offsets, const int64_t *lengths,
                      int64_t batch, int64_t *bag, int64_t *info, void *stream,
                      char *errbuf, size_t errcap);
  /* Pools one feature's rows (DeviceOps::pool; pooling: hb_pooling_code),
   * bit for bit the host collection's float operations. */
  int32_t (*emb_pool)(const float *rows, int64_t dim, const int64_t *slot,
                      const float *weights, size_t n, const int64_t *bag,
                      int64_t batch, int32_t pooling, float *out,
                      int64_t out_stride, void *stream, char *errbuf,
                      size_t errcap);
  /* Per-id gradients of one feature (DeviceOps::expand_grads). */
  int32_t (*emb_expand_grads)(const float *grad, int64_t grad_stride,
                              int64_t dim, const float *weights, size_t n,
                              const int64_t *bag, int64_t batch,
                              int32_t pooling, float *out, void *stream,
                              char *errbuf, size_t errcap);
  /* *differ (device int64) = 1 when a[i] != b[i] for some i < n. */
  int32_t (*emb_ids_equal)(const int64_t *a, const int64_t *b, size_t n,
                           int64_t *differ, void *stream, char *errbuf,
                           size_t errcap);
} hb_cuda_plugin;

/* True when table t (of t->struct_size bytes) has member m. */
#define HB_CUDA_PLUGIN_HAS(t, m)                                       \
  ((t)->struct_size >= offsetof(hb_cuda_plugin, m) + sizeof((t)->m) && \
   (t)->m != NULL)

typedef const hb_cuda_plugin *(*hb_cuda_plugin_entry_fn)(void);
#define HB_CUDA_PLUGIN_ENTRY "hb_cuda_plugin_entry"

#ifdef __cplusplus
}
#endif
#endif
