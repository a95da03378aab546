/*
 * hb.h - the public C ABI of hb, a library for hybrid data-parallel and
 * embedding-sharded training of recommendation models.
 *
 * Plain C99. Every symbol is prefixed hb_ / HB_. Every fallible call returns
 * an hb_status; hb_last_error() then holds a message naming what failed
 * (which rank, which key, which option, which byte offset). No C++ exception,
 * abort() or exit() ever crosses this boundary.
 *
 * The header has two sections, as zstd's does:
 *   - STABLE: append-only. Functions and enum values are never removed or
 *     renumbered within a major version; options structs only grow at the end
 *     (they start with struct_size so old callers keep working).
 *   - EXPERIMENTAL: compiled only when HB_EXPERIMENTAL is defined; may change
 *     in any minor version.
 *
 * Thread safety: unless a function says otherwise, a handle may be used from
 * one thread at a time. Different handles are independent. Serving-mode
 * embeddings (hb_embedding_open) and local metrics are documented per call.
 */
#ifndef HB_H
#define HB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(HB_BUILDING_LIBRARY) && defined(__GNUC__)
#define HB_API __attribute__((visibility("default")))
#else
#define HB_API
#endif

/* ======================================================================== */
/*                                 STABLE                                   */
/* ======================================================================== */

/* ---- Version ------------------------------------------------------------ */

#define HB_VERSION_MAJOR 0
#define HB_VERSION_MINOR 1
#define HB_VERSION_PATCH 0
/** MAJOR * 10000 + MINOR * 100 + PATCH, as zstd's ZSTD_VERSION_NUMBER. */
#define HB_VERSION_NUMBER \
  (HB_VERSION_MAJOR * 10000 + HB_VERSION_MINOR * 100 + HB_VERSION_PATCH)

/** Version of the library actually loaded (compare with HB_VERSION_NUMBER). */
HB_API unsigned hb_version_number(void);

/**
 * One line describing the build and the running machine, e.g.
 * "hb 0.1.0; build=Release; cpu_backend=gloo; cuda_plugin=built(13.0);
 *  cuda_plugin_loaded=no(no driver); nccl=2.27.3".
 * The string is owned by the library and valid until the process exits.
 */
HB_API const char *hb_build_info(void);

/* ---- Status codes ------------------------------------------------------- */

/** Every fallible call returns one of the HB_OK / HB_ERR_* values. */
typedef int32_t hb_status;

enum hb_status_code {
  HB_OK = 0,
  HB_ERR_INVALID_ARGUMENT = 1, /**< NULL where a buffer is needed, bad enum, overflow */
  HB_ERR_CONFIG = 2,           /**< malformed TF_CONFIG, option or HB_* variable */
  HB_ERR_TIMEOUT = 3,          /**< a wait ran past its timeout */
  HB_ERR_PEER_FAILED = 4,      /**< a rank died or its connection broke */
  HB_ERR_ABORTED = 5,          /**< the context was aborted, locally or by a peer */
  HB_ERR_IO = 6,               /**< file or socket error */
  HB_ERR_OUT_OF_MEMORY = 7,
  HB_ERR_UNSUPPORTED = 8, /**< e.g. a CUDA buffer where CUDA is not available */
  HB_ERR_DEVICE = 9,      /**< CUDA or NCCL error */
  HB_ERR_PERMISSION = 10, /**< rendezvous token mismatch */
  HB_ERR_CORRUPT = 11,    /**< checkpoint, export file or wire frame fails its checks */
  HB_ERR_INTERNAL = 12,   /**< a bug in hb; please report it */
  HB_ERR_MISMATCH = 13 /**< ranks made mismatched collective calls (operation, counts, dtype, op, root, table or step differ) */
};

/** Constant name of a status, e.g. "HB_ERR_TIMEOUT"; "HB_ERR_UNKNOWN" otherwise. */
HB_API const char *hb_status_name(hb_status status);

/**
 * Detail of the last failure on the calling thread (thread-local, like
 * errno: set by a failing call, not cleared by a successful one). Never NULL;
 * "" when nothing failed yet on this thread. Valid until the next hb_ call on
 * this thread.
 */
HB_API const char *hb_last_error(void);

/* ---- Data types and reductions ------------------------------------------ */

typedef int32_t hb_dtype;
enum hb_dtype_code {
  HB_FLOAT32 = 0,
  HB_FLOAT64 = 1,
  HB_FLOAT16 = 2, /**< IEEE 754 binary16 */
  HB_BFLOAT16 = 3,
  HB_INT32 = 4,
  HB_INT64 = 5,
  HB_UINT8 = 6
};

/** Size in bytes of one element of dtype; 0 for an unknown dtype. */
HB_API size_t hb_dtype_size(hb_dtype dtype);

typedef int32_t hb_reduce_op;
enum hb_reduce_op_code {
  HB_SUM = 0,
  HB_PROD = 1,
  HB_MIN = 2,
  HB_MAX = 3,
  /** Sum divided by the world size. For integer dtypes the quotient is
   *  truncated toward zero (C integer division) after an exact sum. */
  HB_AVG = 4
};

/* ---- Context and cluster ------------------------------------------------ */

/** A group of ranks that run collectives together. Opaque. */
typedef struct hb_context hb_context;

/**
 * Explicit cluster settings for hb_context_create. Every field left at its
 * HB_CONTEXT_OPTIONS_INIT value means "discover": first the launcher's HB_*
 * variables, then TF_CONFIG, then a world of one that needs no network.
 * Append-only: the library reads min(struct_size, sizeof) bytes.
 */
typedef struct hb_context_options {
  size_t struct_size;       /**< sizeof(hb_context_options) */
  int32_t rank;             /**< -1: discover */
  int32_t world_size;       /**< 0: discover */
  int32_t local_rank;       /**< -1: discover */
  int32_t local_world_size; /**< 0: discover */
  const char *rendezvous;   /**< "host:port" of the store; NULL: discover */
  /**
   * Option assignments, "name=value,name=value" (see hb_option_describe).
   * Applied after the HB_<NAME> environment overrides. NULL: none.
   */
  const char *options;
} hb_context_options;

#define HB_CONTEXT_OPTIONS_INIT \
  { sizeof(hb_context_options), -1, 0, -1, 0, NULL, NULL }

/**
 * Form the cluster: collective over all ranks of the world (each must call
 * it; late joiners within the timeout are fine). opts may be NULL. Rank 0
 * serves the rendezvous store unless a launcher (hbrun) already does.
 * Fails with HB_ERR_CONFIG (bad TF_CONFIG, option or HB_* value),
 * HB_ERR_TIMEOUT (naming the ranks that never arrived), HB_ERR_PERMISSION
 * (token mismatch) or HB_ERR_PEER_FAILED.
 */
HB_API hb_status hb_context_create(const hb_context_options *opts,
                                   hb_context **out);

/** Leave the cluster and free everything; NULL is fine. Not collective. */
HB_API void hb_context_destroy(hb_context *ctx);

/** Accessors: never fail for a valid ctx; -1 / NULL for a NULL ctx. */
HB_API int32_t hb_context_rank(const hb_context *ctx);
HB_API int32_t hb_context_world_size(const hb_context *ctx);
HB_API int32_t hb_context_local_rank(const hb_context *ctx);
HB_API int32_t hb_context_local_world_size(const hb_context *ctx);
/** 1 for the chief (rank 0), 0 otherwise. */
HB_API int32_t hb_context_is_chief(const hb_context *ctx);
/** "chief", "worker", "ps", "evaluator" (TF_CONFIG roles) or "worker". */
HB_API const char *hb_context_task_type(const hb_context *ctx);
/** Index of this task within its TF_CONFIG role (the rank otherwise). */
HB_API int32_t hb_context_task_id(const hb_context *ctx);
/** Number of CUDA devices visible to this process; 0 without CUDA. */
HB_API int32_t hb_context_num_gpus(const hb_context *ctx);
/** The device this rank uses: "cpu:0" or "cuda:N". */
HB_API const char *hb_context_device(const hb_context *ctx);

/**
 * Options. Each has a name (e.g. "timeout_ms"), a type, a default, a doc
 * string and an environment override HB_<NAME> (e.g. HB_TIMEOUT_MS).
 * hb_context_get_option writes the current value as a NUL-terminated string
 * into buf (cap bytes) and the length it needs, NUL included, into *needed
 * (may be NULL); a too-small buf is HB_ERR_INVALID_ARGUMENT. ctx may be NULL
 * to read the process-wide value (default plus environment).
 * hb_context_set_option checks the type: a malformed value or an unknown
 * name is HB_ERR_CONFIG naming both.
 */
HB_API hb_status hb_context_get_option(const hb_context *ctx, const char *name,
                                       char *buf, size_t cap, size_t *needed);
HB_API hb_status hb_context_set_option(hb_context *ctx, const char *name,
                                       const char *value);

/**
 * Describe option number index (0-based): its name, type ("int", "double",
 * "bool", "string" or "enum(a|b|c)"), default and doc. Strings are static.
 * HB_ERR_INVALID_ARGUMENT past the last option.
 */
HB_API hb_status hb_option_describe(size_t index, const char **name,
                                    const char **type,
                                    const char **default_value,
                                    const char **doc);

/** Wait until every rank reached the barrier. timeout_ms <= 0: the
 *  context's timeout_ms option. HB_ERR_TIMEOUT names the missing ranks. */
HB_API hb_status hb_context_barrier(hb_context *ctx, int64_t timeout_ms);

/**
 * Abort the context: every rank's pending and future calls on it return
 * HB_ERR_ABORTED with reason. Safe to call from any thread, even while
 * another thread is blocked in a collective on ctx. The context can then
 * only be destroyed.
 */
HB_API hb_status hb_context_abort(hb_context *ctx, const char *reason);

/**
 * CUDA stream (a cudaStream_t) on which GPU collectives and embedding
 * kernels are enqueued; NULL restores the context's own stream.
 * HB_ERR_UNSUPPORTED without CUDA.
 */
HB_API hb_status hb_context_set_cuda_stream(hb_context *ctx, void *stream);
/** Wait until everything enqueued on the context's CUDA stream finished;
 *  HB_OK at once when nothing was enqueued or there is no CUDA. */
HB_API hb_status hb_context_synchronize(hb_context *ctx);

/** Events that listeners can observe. */
enum hb_event_code {
  HB_EVENT_BEFORE_SAVE = 0, /**< before a checkpoint is written */
  HB_EVENT_AFTER_SAVE = 1,  /**< after a checkpoint was committed */
  HB_EVENT_BEFORE_LOAD = 2,
  HB_EVENT_AFTER_LOAD = 3
};
/** A listener; path is the checkpoint directory. Called on the calling
 *  thread of the save/load, on every rank. */
typedef void (*hb_listener_fn)(hb_context *ctx, int32_t event,
                               const char *path, void *user_data);
HB_API hb_status hb_context_add_listener(hb_context *ctx, int32_t event,
                                         hb_listener_fn fn, void *user_data);

/**
 * Write a TF_CONFIG JSON document (the seed's set_tf_config) into buf: the
 * cluster has "chief": [worker_hosts[0]], "worker": worker_hosts[1..],
 * "ps": ps_hosts and, when has_evaluator, the task may be "evaluator"
 * (evaluators are not listed in the cluster, as in TensorFlow).
 * task_type is "chief", "worker", "ps" or "evaluator"; task_id indexes its
 * role. *needed (may be NULL) gets the size including the NUL; a too-small
 * buf is HB_ERR_INVALID_ARGUMENT and buf is left untouched.
 */
HB_API hb_status hb_tf_config_build(const char *task_type, int32_t task_id,
                                    const char *const *worker_hosts,
                                    size_t n_workers,
                                    const char *const *ps_hosts, size_t n_ps,
                                    int32_t has_evaluator, char *buf,
                                    size_t cap, size_t *needed);

/* ---- Collectives -------------------------------------------------------- */
/*
 * Collective over every rank of ctx, called in the same order on every rank.
 * Buffers are host memory (Gloo) or CUDA device memory (NCCL, enqueued on
 * the context's stream; call hb_context_synchronize before reading).
 * In place when send == recv. Every call honours the timeout_ms option and
 * peer liveness: HB_ERR_TIMEOUT, HB_ERR_PEER_FAILED or HB_ERR_ABORTED
 * instead of blocking forever. Counts are in elements.
 */

HB_API hb_status hb_allreduce(hb_context *ctx, const void *send, void *recv,
                              size_t count, hb_dtype dtype, hb_reduce_op op);

/** recv holds world_size * count elements, rank r's at r * count. */
HB_API hb_status hb_allgather(hb_context *ctx, const void *send, void *recv,
                              size_t count, hb_dtype dtype);

/** Rank r sends send_count elements (must equal recv_counts[r]); they land
 *  at recv + recv_offsets[r] (offsets NULL: packed in rank order). */
HB_API hb_status hb_allgatherv(hb_context *ctx, const void *send,
                               size_t send_count, void *recv,
                               const int64_t *recv_counts,
                               const int64_t *recv_offsets, hb_dtype dtype);

/** count elements to each peer: send block p goes to rank p. */
HB_API hb_status hb_alltoall(hb_context *ctx, const void *send, void *recv,
                             size_t count, hb_dtype dtype);

/**
 * Per-peer counts and offsets (elements, 64-bit, one entry per rank).
 * Offsets NULL: packed in rank order. send_counts[p] on this rank must equal
 * recv_counts[me] on rank p. Negative counts or offsets are
 * HB_ERR_INVALID_ARGUMENT.
 */
HB_API hb_status hb_alltoallv(hb_context *ctx, const void *send,
                              const int64_t *send_counts,
                              const int64_t *send_offsets, void *recv,
                              const int64_t *recv_counts,
                              const int64_t *recv_offsets, hb_dtype dtype);

/** root's send is copied to recv on every rank (send ignored elsewhere). */
HB_API hb_status hb_broadcast(hb_context *ctx, const void *send, void *recv,
                              size_t count, hb_dtype dtype, int32_t root);

/** send holds world_size * recv_count elements; rank r receives the
 *  reduction of block r. */
HB_API hb_status hb_reduce_scatter(hb_context *ctx, const void *send,
                                   void *recv, size_t recv_count,
                                   hb_dtype dtype, hb_reduce_op op);

/**
 * Gradient fusion: reduce n tensors in place, packed into buckets (options
 * grad_nbuckets or grad_bucket_bytes). The result is exactly that of one
 * hb_allreduce per tensor.
 */
HB_API hb_status hb_allreduce_many(hb_context *ctx, void *const *bufs,
                                   const size_t *counts, size_t n,
                                   hb_dtype dtype, hb_reduce_op op);

/* ---- Sharded embeddings ------------------------------------------------- */

/** A table sharded over the ranks of a context, or a read-only serving
 *  table opened from an export file. Opaque. */
typedef struct hb_embedding hb_embedding;

enum hb_partition_code {
  HB_PARTITION_MOD = 0, /**< owner = (uint64_t)id % world_size */
  HB_PARTITION_DIV = 1  /**< contiguous blocks of ceil(num_rows / world) */
};
enum hb_initializer_code {
  HB_INIT_ZEROS = 0,
  HB_INIT_CONSTANT = 1, /**< init_a */
  HB_INIT_UNIFORM = 2,  /**< [init_a, init_b) */
  HB_INIT_NORMAL = 3    /**< mean init_a, stddev init_b */
};
enum hb_optimizer_code {
  HB_OPT_SGD = 0,
  HB_OPT_ADAGRAD = 1,
  HB_OPT_ADAM = 2, /**< lazy: only touched rows, per-row step counts */
  HB_OPT_FTRL = 3
};

/** Append-only; see HB_EMBEDDING_CONFIG_INIT for the defaults. */
typedef struct hb_embedding_config {
  size_t struct_size;
  const char *name;   /**< unique per context; names checkpoint files */
  int64_t dim;        /**< row width, > 0 */
  hb_dtype dtype;     /**< rows and gradients in the API: HB_FLOAT32 */
  int64_t num_rows;   /**< > 0: static ids [0, num_rows); 0: dynamic hash */
  int32_t partition;  /**< hb_partition_code */
  int32_t initializer;
  double init_a;
  double init_b;
  uint64_t seed;      /**< a row's initial value depends on (seed, name, id) */
  int32_t optimizer;
  double learning_rate;
  double initial_accumulator; /**< Adagrad and FTRL */
  double beta1;               /**< Adam */
  double beta2;               /**< Adam */
  double epsilon;             /**< Adam, Adagrad */
  double l1;                  /**< FTRL */
  double l2;                  /**< FTRL */
  double lr_power;            /**< FTRL, <= 0 */
  hb_dtype wire_dtype; /**< HB_FLOAT32, HB_FLOAT16 or HB_BFLOAT16 on the wire */
  /** -1: host memory; N >= 0: the rows live on CUDA device N, which must be
   *  the context's device (on every rank). Then ids, out and grads are CUDA
   *  device pointers (host pointers: HB_ERR_INVALID_ARGUMENT), the work is
   *  enqueued on the context's stream (results ready in stream order or
   *  after hb_context_synchronize), and results, checkpoints and exports
   *  equal a host table's.
   *  HB_ERR_UNSUPPORTED without CUDA. */
  int32_t device;
} hb_embedding_config;

#define HB_EMBEDDING_CONFIG_INIT                                             \
  {                                                                          \
    sizeof(hb_embedding_config), NULL, 0, HB_FLOAT32, 0, HB_PARTITION_MOD,   \
        HB_INIT_ZEROS, 0.0, 0.0, 0, HB_OPT_SGD, 0.01, 0.1, 0.9, 0.999, 1e-8, \
        0.0, 0.0, -0.5, HB_FLOAT32, -1                                       \
  }

/** Collective: every rank creates its shard of the table. */
HB_API hb_status hb_embedding_create(hb_context *ctx,
                                     const hb_embedding_config *cfg,
                                     hb_embedding **out);
HB_API void hb_embedding_destroy(hb_embedding *emb);

/**
 * out (n x dim, in the order of ids) gets the rows. Collective for a sharded
 * table (ranks may pass different n, including 0). On a serving table
 * (hb_embedding_open) it is local and thread-safe; unknown ids read zeros
 * and count as misses.
 */
HB_API hb_status hb_embedding_lookup(hb_embedding *emb, const int64_t *ids,
                                     size_t n, void *out);

/** Collective: grads is n x dim. Duplicate ids are summed; each touched row
 *  gets exactly one optimizer step per call. */
HB_API hb_status hb_embedding_apply_gradients(hb_embedding *emb,
                                              const int64_t *ids, size_t n,
                                              const void *grads);

/** Collective checkpoint of rows and slots into directory dir (atomic). */
HB_API hb_status hb_embedding_save(hb_embedding *emb, const char *dir);
/** Collective load; re-shards when saved at another world size. A bad
 *  checkpoint is HB_ERR_CORRUPT / HB_ERR_INVALID_ARGUMENT and changes
 *  nothing. */
HB_API hb_status hb_embedding_load(hb_embedding *emb, const char *dir);

/** Collective: write one self-describing serving file (rank 0 writes). */
HB_API hb_status hb_embedding_export(hb_embedding *emb, const char *path);
/** Open an exported file read-only, with no context. */
HB_API hb_status hb_embedding_open(const char *path, hb_embedding **out);

HB_API int64_t hb_embedding_dim(const hb_embedding *emb);
/** Rows held by this rank (the whole table for a serving table). */
HB_API int64_t hb_embedding_local_rows(const hb_embedding *emb);
/** Serving tables: ids looked up that were not in the file, since open. */
HB_API uint64_t hb_embedding_misses(const hb_embedding *emb);

/* ---- Metrics ------------------------------------------------------------ */
/*
 * Streaming metrics (semantics in docs/metrics.md). Counts and weight sums
 * are exact (integers and exact float sums, never float32 counters), so a
 * metric with a context gives, in hb_metric_result, bit for bit the result
 * of one process that saw every rank's samples, however they were split.
 * For the AUC kinds a sample is positive when its label is != 0 (TF casts
 * labels to bool). A metric is used from one thread at a time; separate
 * metrics (e.g. one per serving thread) are independent.
 */

typedef struct hb_metric hb_metric;

enum hb_metric_kind_code {
  HB_METRIC_ACCURACY = 0, /**< weighted mean of (pred == label) */
  HB_METRIC_MEAN = 1,     /**< weighted mean of preds (labels ignored) */
  HB_METRIC_AUC = 2,      /**< thresholded, as tf.compat.v1.metrics.auc */
  HB_METRIC_AUC_EXACT = 3, /**< exact ROC AUC, ties count one half */
  HB_METRIC_GAUC = 4       /**< per-group exact AUC, combined */
};
enum hb_curve_code { HB_CURVE_ROC = 0, HB_CURVE_PR = 1 };
enum hb_summation_code {
  HB_SUMMATION_TRAPEZOIDAL = 0,
  HB_SUMMATION_CAREFUL_INTERPOLATION = 1,
  HB_SUMMATION_MINORING = 2,
  HB_SUMMATION_MAJORING = 3
};
enum hb_gauc_weighting_code {
  HB_GAUC_UNWEIGHTED = 0,  /**< mean of the groups' AUCs */
  HB_GAUC_IMPRESSIONS = 1, /**< weighted by the group's total sample weight */
  HB_GAUC_CLICKS = 2       /**< weighted by the group's positive weight */
};
/** Flags describing the last hb_metric_result. */
enum hb_metric_flag_code {
  HB_METRIC_FLAG_EMPTY = 1,        /**< no samples (or all weights 0): result is 0 */
  /** AUC with one class only (GAUC: no group has both classes): result 0.5 */
  HB_METRIC_FLAG_SINGLE_CLASS = 2,
  HB_METRIC_FLAG_APPROXIMATE = 4   /**< bounded-memory variant was used */
};

typedef struct hb_metric_config {
  size_t struct_size;
  int32_t kind;
  int32_t num_thresholds; /**< HB_METRIC_AUC, default 200 */
  int32_t curve;
  int32_t summation;
  int32_t gauc_weighting;
  /** Accuracy: when >= 0, predictions are thresholded first
   *  (pred > threshold -> 1, else 0). -1: compare as given. */
  double threshold;
  /** HB_METRIC_AUC_EXACT / GAUC: 0 = exact (memory grows with samples);
   *  > 0 = bounded memory, a histogram with this many bins over [0, 1].
   *  Exact AUC keeps 8 bytes per sample with a nonzero weight (GAUC 16).
   *  With bins, memory is 16 bytes per bin (+192 once weights are given),
   *  predictions must lie in [0, 1], and |result - exact AUC| <=
   *  sum_b P_b N_b / (2 P N) <= max_b N_b / (2 N) (P_b, N_b: positive and
   *  negative weight in bin b; P, N: totals). GAUC supports only bins = 0
   *  (HB_ERR_UNSUPPORTED otherwise). At most 2^28 bins. */
  int64_t bins;
} hb_metric_config;

#define HB_METRIC_CONFIG_INIT                                              \
  {                                                                        \
    sizeof(hb_metric_config), HB_METRIC_AUC, 200, HB_CURVE_ROC,            \
        HB_SUMMATION_TRAPEZOIDAL, HB_GAUC_UNWEIGHTED, -1.0, 0              \
  }

/** ctx NULL: a local metric (no collective in result). */
HB_API hb_status hb_metric_create(hb_context *ctx, const hb_metric_config *cfg,
                                  hb_metric **out);
HB_API void hb_metric_destroy(hb_metric *m);
/**
 * Labels in [0, 1] (NULL allowed for HB_METRIC_MEAN); predictions finite,
 * and in [0, 1] for HB_METRIC_AUC and the bins variant; weights NULL means
 * 1, else finite and >= 0 (0 masks a sample). A bad element is
 * HB_ERR_INVALID_ARGUMENT naming its index, and the batch is not counted.
 */
HB_API hb_status hb_metric_update(hb_metric *m, const float *labels,
                                  const float *preds, const float *weights,
                                  size_t n);
/** GAUC: as hb_metric_update, plus a group id per sample. */
HB_API hb_status hb_metric_update_grouped(hb_metric *m, const float *labels,
                                          const float *preds,
                                          const float *weights,
                                          const int64_t *groups, size_t n);
/**
 * Collective when the metric has a context: merges every rank's state (the
 * local state is unchanged, so updates may go on). Ranks whose configs
 * differ all get HB_ERR_INVALID_ARGUMENT naming the field.
 */
HB_API hb_status hb_metric_result(hb_metric *m, double *out);
/** hb_metric_flag_code bits of the last result. */
HB_API int32_t hb_metric_flags(const hb_metric *m);
HB_API hb_status hb_metric_reset(hb_metric *m);

/* ---- Unbalanced data ---------------------------------------------------- */

/**
 * Call once per step on every rank. With drop_remainder, *out_continue is 0
 * on every rank as soon as any rank has no data. Without it, ranks out of
 * data get *out_continue = 1 and *out_feed_empty = 1 (run the step with an
 * empty batch) until every rank is out.
 */
HB_API hb_status hb_data_sync(hb_context *ctx, int32_t local_has_data,
                              int32_t drop_remainder, int32_t *out_continue,
                              int32_t *out_feed_empty);

/**
 * Deterministic, even assignment of num_items items (files or rows) to
 * num_shards shards: shard gets the contiguous range [*begin, *end); shard
 * sizes differ by at most one. strict: a shard that would get nothing is
 * HB_ERR_INVALID_ARGUMENT.
 */
HB_API hb_status hb_shard_range(int64_t num_items, int32_t num_shards,
                                int32_t shard, int32_t strict, int64_t *begin,
                                int64_t *end);

/* ---- Placement (AdaNet strategies) -------------------------------------- */

/**
 * AdaNet's ReplicationStrategy / RoundRobinStrategy answers for worker
 * worker_index of num_workers: *out_build_ensemble, *out_train_subnetworks
 * and, for each of the num_subnetworks subnetworks, out_build_subnetwork[i]
 * (an array of num_subnetworks entries).
 */
HB_API hb_status hb_placement_replication(int32_t num_workers,
                                          int32_t worker_index,
                                          int32_t num_subnetworks,
                                          int32_t *out_build_ensemble,
                                          int32_t *out_train_subnetworks,
                                          int32_t *out_build_subnetwork);
HB_API hb_status hb_placement_round_robin(int32_t num_workers,
                                          int32_t worker_index,
                                          int32_t num_subnetworks,
                                          int32_t drop_remainder,
                                          int32_t *out_build_ensemble,
                                          int32_t *out_train_subnetworks,
                                          int32_t *out_build_subnetwork);

/* ======================================================================== */
/*                              EXPERIMENTAL                                */
/* ======================================================================== */
#ifdef HB_EXPERIMENTAL
/* Nothing yet. */
#endif

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HB_H */
