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

/** Leave the cluster and free everything; NULL is fine. Not collective.
 *  Returns promptly whatever the peers do (rank 0, when it serves the
 *  store, waits at most peer_timeout_ms for the others to leave). */
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

struct hb_embedding_lifecycle; /* EXPERIMENTAL, below */

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
  /** Where the rows live (hb_placement_code in the EXPERIMENTAL section):
   *  0 (HB_PLACEMENT_WORKERS) sharded over the ranks as above; 1
   *  (HB_PLACEMENT_PS) on the job's ps tasks (docs/parameter-servers.md). */
  int32_t placement;
  /** EXPERIMENTAL (the struct is defined under HB_EXPERIMENTAL): admission
   *  and eviction of a dynamic host table's rows (docs/table-lifecycle.md).
   *  NULL: every id gets a row on first touch and keeps it. Read during
   *  hb_embedding_create only (the table keeps a copy). */
  const struct hb_embedding_lifecycle *lifecycle;
} hb_embedding_config;

#define HB_EMBEDDING_CONFIG_INIT                                             \
  {                                                                          \
    sizeof(hb_embedding_config), NULL, 0, HB_FLOAT32, 0, HB_PARTITION_MOD,   \
        HB_INIT_ZEROS, 0.0, 0.0, 0, HB_OPT_SGD, 0.01, 0.1, 0.9, 0.999, 1e-8, \
        0.0, 0.0, -0.5, HB_FLOAT32, -1, 0, NULL                              \
  }

/** Collective: every rank creates its shard of the table. Ranks passing
 *  different configs all get HB_ERR_INVALID_ARGUMENT naming each field that
 *  differs and every rank's value (e.g. "dim: 8 (ranks 0,2) vs 6 (rank 1)").
 *  Names are unique per context: a second live table with a name is
 *  HB_ERR_INVALID_ARGUMENT on every rank. Every collective call on a table
 *  (lookup, apply, save, load, export) checks across ranks that all ranks
 *  made the same call on the same table at the same point of its call
 *  sequence; otherwise it is HB_ERR_MISMATCH on every rank, naming each
 *  rank's call, before any row moves (the table is unchanged and the next
 *  matched call works). */
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

/**
 * Collective: grads is n x dim. Duplicate ids are summed; each touched row
 * gets exactly one optimizer step per call. The sum of an id is float32 in
 * a fixed order: each rank adds its own occurrences in batch order, the
 * owner adds the ranks' partial sums in rank order (docs/embedding-format.md,
 * "Step order"). So results are bit-identical at a fixed world size, for
 * every partition, run, transport and host or GPU table; at a different
 * world size they are bit-identical when every partial sum is exact in
 * float32 (and in the wire dtype), and may otherwise differ in the last
 * bits (the sum is grouped differently).
 */
HB_API hb_status hb_embedding_apply_gradients(hb_embedding *emb,
                                              const int64_t *ids, size_t n,
                                              const void *grads);

/** Collective checkpoint of rows and slots into directory dir (atomic);
 *  dir and its missing parents are created. */
HB_API hb_status hb_embedding_save(hb_embedding *emb, const char *dir);
/** Collective load; re-shards when saved at another world size. A bad
 *  checkpoint (including a shard file the manifest names that is missing
 *  or unreadable) is HB_ERR_CORRUPT / HB_ERR_INVALID_ARGUMENT, names the
 *  table and the file, and changes nothing. */
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
 * local state is unchanged, so updates may go on). Ranks merging metrics
 * of different kinds or configs, or at different points of the metric's
 * merge sequence, all get HB_ERR_MISMATCH naming each rank's call (for
 * configs: each field that differs and every rank's value).
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
 * empty batch) until every rank is out. Ranks that pass different
 * drop_remainder values (or are at different points of the hb_data_sync
 * sequence) all get HB_ERR_MISMATCH naming the ranks that differ.
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

/* ---- Embedding collections ---------------------------------------------- */
/*
 * A collection groups the tables of a model and runs one collective step for
 * all of them: a lookup of every feature costs at most three exchanges (one
 * header with the counts of every table, one of the ids, one of the rows),
 * and the gradient step after a lookup of the same ids reuses the lookup's
 * plan (local dedup, owners, what each owner received and its dedup) and
 * costs one exchange of the gradients. Semantics, summation order and the
 * round count are in docs/embedding-collections.md.
 *
 * A feature reads one table (several features may share a table) with a
 * pooling mode. The input is jagged per feature, as TorchRec's
 * KeyedJaggedTensor: per sample a bag of ids (one-hot, multi-hot or empty),
 * optionally a weight per id. Results equal, bit for bit,
 * hb_embedding_lookup / _apply_gradients of the table on the concatenation
 * of its features' ids (feature order, then sample order) followed by the
 * pooling documented there, so the same bits as a table have (see
 * hb_embedding_apply_gradients): at a fixed world size, for every partition
 * and run; across world sizes, when every partial sum of the gradients is
 * exact.
 *
 * Tables stay ordinary hb_embedding handles: save, load, export and the
 * single-table calls work on them unchanged. A collection references its
 * tables (it does not own them): destroy it before them. Its tables all live
 * on the host or all on the context's GPU (device >= 0; mixing them is
 * HB_ERR_UNSUPPORTED). With GPU tables, the batch's ids, offsets, lengths
 * and weights, and out, unpooled, grad_out and grad_unpooled are CUDA
 * device pointers (the arrays of pointers stay in host memory), the calls
 * are ordered on the context's stream (hb_context_synchronize) and results
 * are bit-identical to host tables'. A collection is used from one thread
 * at a time, like its context.
 */

typedef struct hb_collection hb_collection;

enum hb_pooling_code {
  /** One output row per id (a separate output per feature, see below). */
  HB_POOLING_NONE = 0,
  HB_POOLING_SUM = 1,  /**< sum of the bag's (weighted) rows */
  HB_POOLING_MEAN = 2, /**< the sum divided by the bag's id count */
  HB_POOLING_SQRTN = 3 /**< the sum divided by sqrt(id count) */
};

/** One feature. Append-only (struct_size). */
typedef struct hb_collection_feature {
  size_t struct_size;
  const char *name;      /**< for messages; NULL: "feature<i>" */
  hb_embedding *table;   /**< a sharded table on the collection's ctx */
  int32_t pooling;       /**< hb_pooling_code */
} hb_collection_feature;

#define HB_COLLECTION_FEATURE_INIT \
  { sizeof(hb_collection_feature), NULL, NULL, HB_POOLING_SUM }

/**
 * Collective: every rank passes the same features in the same order (the
 * same tables by config, the same pooling); otherwise every rank gets
 * HB_ERR_INVALID_ARGUMENT naming the ranks that differ and, per feature,
 * each of its name, table, pooling and dim that differs with every rank's
 * value. At least one feature.
 */
HB_API hb_status hb_collection_create(hb_context *ctx,
                                      const hb_collection_feature *features,
                                      size_t num_features,
                                      hb_collection **out);
HB_API void hb_collection_destroy(hb_collection *coll);

HB_API size_t hb_collection_num_features(const hb_collection *coll);
/** Width of the pooled output: the sum of the dims of the pooled features
 *  (pooling != NONE); 0 for a NULL coll. */
HB_API int64_t hb_collection_pooled_width(const hb_collection *coll);
/** Column of feature f in the pooled output; -1 for a pooling-NONE feature
 *  or an f out of range. */
HB_API int64_t hb_collection_feature_column(const hb_collection *coll,
                                            size_t feature);
/** Row width (the table's dim) of feature f; 0 when out of range. */
HB_API int64_t hb_collection_feature_dim(const hb_collection *coll,
                                         size_t feature);

/**
 * One batch of this rank, jagged per feature. batch_size (B) may differ per
 * rank, including 0. For feature f, either
 *  - offsets[f] has B + 1 non-decreasing entries >= 0: sample b's ids are
 *    ids[f][offsets[f][b] .. offsets[f][b+1]) (offsets[f][0] need not be
 *    0, so a flat KeyedJaggedTensor passes ids[f] = values and offsets[f] =
 *    kjt_offsets + f * B for every f), or
 *  - offsets is NULL and lengths[f] has B entries >= 0: the bags follow one
 *    another from ids[f][0].
 * weights: NULL (every weight 1), or per feature NULL or one float per id,
 * indexed like ids[f]. With B = 0 a feature's arrays may be NULL.
 */
typedef struct hb_jagged_batch {
  size_t struct_size;
  int64_t batch_size;
  const int64_t *const *ids;     /**< [num_features] */
  const int64_t *const *offsets; /**< [num_features] or NULL */
  const int64_t *const *lengths; /**< [num_features] or NULL (with offsets) */
  const float *const *weights;   /**< NULL, or [num_features] each NULL or per id */
} hb_jagged_batch;

#define HB_JAGGED_BATCH_INIT \
  { sizeof(hb_jagged_batch), 0, NULL, NULL, NULL, NULL }

/**
 * Collective. out: B x pooled_width float32, row-major; feature f's pooled
 * rows at column hb_collection_feature_column(f). unpooled: NULL when no
 * feature has pooling NONE, else [num_features] where entry f of a NONE
 * feature receives one row per id (n_f x dim, in the order of its ids,
 * each multiplied by its weight when weights are given; other entries are
 * ignored). An empty bag pools to zeros.
 */
HB_API hb_status hb_collection_lookup(hb_collection *coll,
                                      const hb_jagged_batch *batch, float *out,
                                      float *const *unpooled);

/**
 * Collective gradient step: grad_out is the gradient of out (B x
 * pooled_width), grad_unpooled that of unpooled (as in lookup). Each id gets
 * its (weighted, scaled) share of its bag's gradient; duplicates are summed
 * and every touched row gets one optimizer step per call. When every rank
 * passes the ids of its last lookup on this collection (compared exactly,
 * not trusted), the lookup's plan is reused and the step costs one
 * exchange; otherwise it plans again (three exchanges, plus the one that
 * found out).
 */
HB_API hb_status hb_collection_apply_gradients(
    hb_collection *coll, const hb_jagged_batch *batch, const float *grad_out,
    const float *const *grad_unpooled);

/** This rank's counters since creation (or the last reset). */
typedef struct hb_collection_stats {
  size_t struct_size;
  uint64_t lookups, updates;
  uint64_t reused_plans;  /**< updates that reused their lookup's plan */
  uint64_t rounds;        /**< exchanges (collective rounds) issued */
  uint64_t ids;           /**< ids passed in, all features */
  uint64_t unique_ids;    /**< after the local dedup, per table */
  uint64_t owner_unique;  /**< after the owner dedup */
  uint64_t wire_bytes_sent, wire_bytes_recv; /**< to / from other ranks */
  /** What this rank's dedup bounds: its unique ids sent to remote owners
   *  (8 bytes each, once per lookup) plus the rows back and the gradients
   *  out (wire bytes each). wire_bytes_sent + recv minus headers equals it
   *  for lookups that reuse their plan. */
  uint64_t dedup_bound_bytes;
} hb_collection_stats;

#define HB_COLLECTION_STATS_INIT \
  { sizeof(hb_collection_stats), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }

HB_API hb_status hb_collection_get_stats(const hb_collection *coll,
                                         hb_collection_stats *out);
HB_API hb_status hb_collection_reset_stats(hb_collection *coll);

/* ---- Reader: sharded, parallel Criteo-format files ------------------------ */
/*
 * Reads text files of samples, one per line (Criteo layout by default: a
 * label, 13 integer features and 26 categorical features as hexadecimal
 * strings, tab-separated), shards them over the ranks of a context, parses
 * them on background threads and hands out batches laid out for an
 * embedding collection (docs/reader.md).
 *
 * Files: plain or gzip (recognised by their magic bytes, not their name).
 * Sharding, per epoch, after the optional shuffle of the file order: with at
 * least as many files as ranks, file i goes to rank i % world; otherwise the
 * files' bytes, laid end to end, are cut into world equal byte ranges and a
 * plain file is read by byte range: a range [s, e) of a file reads the lines
 * that start in (s, e] (in [0, e] when s == 0), i.e. it starts after the
 * first newline at or after s and ends with the line that crosses e. A gzip
 * file cannot be split: it goes whole to the rank whose range holds its first
 * byte (some ranks may get no gzip file). Either way every line is read by
 * exactly one rank. Empty lines (after stripping a final "\r") are skipped.
 *
 * Batch layout (hb_reader_batch), for n samples and F categorical features:
 *   labels   float32[n]
 *   dense    float32[n * D], row-major (sample i's features at i * D)
 *   offsets  int64[F * n + 1]: feature f, sample i has the ids
 *            ids[offsets[f * n + i] .. offsets[f * n + i + 1]) -- zero ids
 *            (an empty field: an empty bag) or one id. Feature f's own
 *            offsets are the n + 1 entries from offsets + f * n; its ids are
 *            ids[offsets[f * n] .. offsets[f * n + n]).
 *   ids      int64[offsets[F * n]], feature-major.
 * This is the KeyedJaggedTensor layout (values, offsets) of TorchRec.
 *
 * Values: the label and the dense fields are decimal numbers (integers, or
 * with a fraction/exponent); a missing dense field is dense_missing; with
 * log_dense a dense value x becomes log(1 + max(x, 0)) (after the missing
 * value is filled in). A categorical field is up to 16 hexadecimal digits
 * (either case), read as an unsigned 64-bit value v: the id is v (as int64)
 * when num_rows is 0, else v mod num_rows (HB_READER_HASH_MOD) or
 * splitmix64(v) mod num_rows (HB_READER_HASH_MIX), in [0, num_rows).
 *
 * Errors: a malformed line (wrong column count, a label or dense field that
 * is not a number, a categorical field that is not hex or has more than 16
 * digits) is HB_ERR_CORRUPT naming file, line and column -- or, with
 * skip_bad_lines, counted (hb_reader_skipped_lines) and skipped. A line
 * longer than max_line_bytes is HB_ERR_CORRUPT (skipped as bad with
 * skip_bad_lines). A missing or unreadable file is HB_ERR_IO naming it
 * (hb_reader_create checks every file); a truncated gzip stream is
 * HB_ERR_CORRUPT. An error is returned by hb_reader_next at its place in the
 * stream, after the batches before it; the reader then keeps returning it.
 *
 * Thread safety: a reader is used from one thread at a time; its own
 * threads never call back into the caller. Batches are independent of the
 * reader and of each other (free them from any thread, before or after the
 * reader is destroyed).
 */
/** A reader of one rank's share of the files. Opaque. */
typedef struct hb_reader hb_reader;

/** How categorical values are hashed into [0, num_rows). */
enum hb_reader_hash_code {
  HB_READER_HASH_MOD = 0, /**< id = v mod num_rows */
  HB_READER_HASH_MIX = 1  /**< id = splitmix64(v) mod num_rows */
};

/** Reader settings. Append-only: the library reads min(struct_size,
 *  sizeof) bytes. */
typedef struct hb_reader_config {
  size_t struct_size;    /**< sizeof(hb_reader_config) */
  int64_t batch_size;    /**< samples per batch (default 1024) */
  /** One letter per column: 'L' label (at most one), 'I' dense/integer,
   *  'C' categorical, 'S' skipped. NULL: Criteo, "L" + 13 'I' + 26 'C'. */
  const char *columns;
  int32_t separator;     /**< column separator byte (default a tab) */
  int32_t log_dense;     /**< 1: dense x -> log(1 + max(x, 0)) (default 0) */
  float dense_missing;   /**< value of an empty dense field (default 0) */
  int64_t num_rows;      /**< > 0: ids hashed into [0, num_rows); 0: raw */
  int32_t hash;          /**< hb_reader_hash_code, when num_rows > 0 */
  int32_t skip_bad_lines; /**< 1: count and skip malformed lines */
  int64_t max_line_bytes; /**< longer lines are malformed (default 1 MiB) */
  int32_t num_threads;   /**< parser threads (default 2) */
  int32_t queue_depth;   /**< parsed blocks queued per thread (default 4) */
  int64_t chunk_bytes;   /**< a plain file range is parsed in chunks of
                              about this size (default 4 MiB) */
  int32_t num_epochs;    /**< passes over the files (default 1; 0: endless) */
  int32_t shuffle;       /**< 1: shuffle the file order every epoch */
  uint64_t seed;         /**< shuffle seed: same seed, same order */
  int32_t drop_last;     /**< 1: drop a short last batch of an epoch */
  /** Shard of this reader: -1/0 take rank/world from ctx (or 0/1 when ctx
   *  is NULL: read everything). Explicit values need no context. */
  int32_t shard_index;
  int32_t num_shards;
} hb_reader_config;

#define HB_READER_CONFIG_INIT                                              \
  {                                                                        \
    sizeof(hb_reader_config), 1024, NULL, '\t', 0, 0.0f, 0,                \
        HB_READER_HASH_MOD, 0, 1 << 20, 2, 4, 4 << 20, 1, 0, 0, 0, -1, 0  \
  }

/** One batch; fields as in the layout above. Owned by the caller. */
typedef struct hb_reader_batch {
  int64_t size;        /**< n samples (< batch_size only at an epoch's end) */
  int32_t num_dense;   /**< D */
  int32_t num_sparse;  /**< F */
  int32_t epoch;       /**< the epoch its samples come from (0-based) */
  int32_t reserved;    /**< 0 */
  float *labels;       /**< n labels (0 without a label column) */
  float *dense;        /**< n x D dense values, row-major */
  int64_t *offsets;    /**< F * n + 1 offsets into ids, feature-major */
  int64_t *ids;        /**< num_ids categorical ids, feature-major */
  int64_t num_ids;     /**< offsets[F * n] */
} hb_reader_batch;

/**
 * paths: files and glob patterns (each pattern's matches in sorted order; a
 * pattern matching nothing is HB_ERR_IO). ctx: gives rank and world for
 * sharding (see shard_index); not used otherwise, and not retained. cfg
 * NULL: defaults. Starts the parser threads.
 */
HB_API hb_status hb_reader_create(hb_context *ctx, const char *const *paths,
                                  size_t num_paths,
                                  const hb_reader_config *cfg,
                                  hb_reader **out);
/** Stops the threads; batches already returned stay valid. */
HB_API void hb_reader_destroy(hb_reader *r);
/**
 * Next batch of this rank into *out (free it with hb_reader_batch_free), or
 * *out = NULL when this rank is out of data -- then call hb_data_sync with
 * local_has_data = 0 (drop remainder, or feed empty batches until every
 * rank is done). Blocks while the parser threads catch up.
 */
HB_API hb_status hb_reader_next(hb_reader *r, hb_reader_batch **out);
/** Frees a batch (NULL is fine); any thread, before or after the reader
 *  is destroyed. */
HB_API void hb_reader_batch_free(hb_reader_batch *b);
/** Lines delivered in batches so far. */
HB_API uint64_t hb_reader_lines(const hb_reader *r);
/** Malformed lines skipped (skip_bad_lines), in the batches so far. */
HB_API uint64_t hb_reader_skipped_lines(const hb_reader *r);
/** Files after glob expansion (all ranks' files). */
HB_API int64_t hb_reader_num_files(const hb_reader *r);
/**
 * Parses one line (without its newline) as the reader would, for tests and
 * tools: writes *label, dense[D] and per categorical feature ids[f] and
 * present[f] (0: empty field). cfg NULL: defaults.
 */
HB_API hb_status hb_reader_parse_line(const hb_reader_config *cfg,
                                      const char *line, size_t len,
                                      float *label, float *dense,
                                      int64_t *ids, int32_t *present);

/* ======================================================================== */
/*                              EXPERIMENTAL                                */
/* ======================================================================== */
#ifdef HB_EXPERIMENTAL

/* ---- Table lifecycle: admission, eviction, bounded memory ---------------- */
/*
 * A dynamic host table (num_rows = 0, device = -1) with a lifecycle
 * (hb_embedding_config.lifecycle) admits an id only after it was seen
 * min_count times and evicts rows by age, by a capacity and by L2 norm, so
 * a table fed a never-ending stream of ids stays within a memory bound.
 * Semantics, what is deterministic and the memory bound:
 * docs/table-lifecycle.md. In short:
 *  - the table's update step counts its apply calls (hb_embedding_apply_
 *    gradients and collection gradient steps); it is the same on every
 *    rank, and so is everything decided by it;
 *  - rows are created only by gradient steps: a lookup of an id without a
 *    row reads its initial value (admission off) or default_value (until
 *    admitted) and creates nothing;
 *  - an id is "seen" once per update step whose batch (any rank's)
 *    carries it; at the step where its count reaches min_count it gets a
 *    row (initialized as usual) and that step's gradient; before, its
 *    gradients are dropped;
 *  - every evict_interval update steps (a boundary, after that step's
 *    updates) rows are evicted: not updated for ttl_steps steps; not
 *    updated for ttl_seconds (rank 0's clock: not deterministic); weights'
 *    L2 norm below min_l2_norm; then, while the table (all ranks) holds
 *    more than max_rows rows, the rows of lowest score (LRU: the step of
 *    the last update; LFU: the number of updates; ties: the smaller id)
 *    -- an exact global selection;
 *  - except for ttl_seconds and the Bloom filter's collisions, rows,
 *    values and evictions are bit-identical at every world size and equal
 *    to a single process; checkpoints keep counters, ages and scores.
 * A lifecycle on a static (num_rows > 0) table is HB_ERR_INVALID_ARGUMENT,
 * on a GPU table (device >= 0) HB_ERR_UNSUPPORTED.
 */
enum hb_admission_code {
  HB_ADMIT_ALL = 0,   /**< every id gets a row at its first gradient step */
  HB_ADMIT_COUNT = 1, /**< exact per-id counters */
  HB_ADMIT_BLOOM = 2  /**< counting Bloom filter (fixed memory, approximate) */
};
enum hb_evict_score_code {
  HB_SCORE_LRU = 0, /**< the update step of the row's last update */
  HB_SCORE_LFU = 1  /**< the row's number of updates */
};

/** Called on the owner rank, at a boundary, with the ids it evicted
 *  (ascending; from the thread making the apply call). */
typedef void (*hb_evict_callback)(const int64_t *ids, size_t n,
                                  void *user_data);

/** Append-only (struct_size); HB_EMBEDDING_LIFECYCLE_INIT: no admission,
 *  no eviction. Zero turns a limit off. */
typedef struct hb_embedding_lifecycle {
  size_t struct_size;
  int32_t admission;     /**< hb_admission_code */
  int32_t min_count;     /**< steps that must carry an id (1..255 for BLOOM) */
  int64_t bloom_bytes;   /**< BLOOM: counters (1 byte each), all ranks */
  double bloom_fpr;      /**< BLOOM: false-positive rate (sets the hashes) */
  float default_value;   /**< what a not yet admitted id reads (every column) */
  int64_t evict_interval; /**< update steps between boundaries (>= 1) */
  int64_t ttl_steps;     /**< evict rows not updated for this many steps */
  double ttl_seconds;    /**< evict rows not updated for this long (wall) */
  int64_t max_rows;      /**< capacity of the whole table (all ranks) */
  int32_t score;         /**< hb_evict_score_code for max_rows */
  double min_l2_norm;    /**< evict rows whose weights' L2 norm is below */
  hb_evict_callback on_evict; /**< NULL: none */
  void *user_data;
} hb_embedding_lifecycle;

#define HB_EMBEDDING_LIFECYCLE_INIT                                        \
  {                                                                        \
    sizeof(hb_embedding_lifecycle), HB_ADMIT_ALL, 1, 0, 0.01, 0.0f, 1, 0,  \
        0.0, 0, HB_SCORE_LRU, 0.0, NULL, NULL                              \
  }

/** This rank's lifecycle counters (its shard). Append-only. */
typedef struct hb_embedding_lifecycle_stats {
  size_t struct_size;
  uint64_t step;             /**< the table's update step */
  int64_t rows;              /**< live rows on this rank */
  int64_t pending;           /**< ids counted, not admitted (COUNT) */
  uint64_t admitted;         /**< rows created */
  uint64_t dropped;          /**< gradients dropped (id not admitted) */
  uint64_t evicted_ttl;      /**< by ttl_steps or ttl_seconds */
  uint64_t evicted_l2;       /**< by min_l2_norm */
  uint64_t evicted_capacity; /**< by max_rows */
  uint64_t boundaries;       /**< eviction boundaries run */
  uint64_t selection_rounds; /**< collective rounds of the max_rows selection */
  double boundary_seconds;   /**< time spent in boundaries */
  uint64_t memory_bytes;     /**< rows, index and lifecycle state */
} hb_embedding_lifecycle_stats;

#define HB_EMBEDDING_LIFECYCLE_STATS_INIT \
  { sizeof(hb_embedding_lifecycle_stats), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.0, 0 }

/** Local (no communication). HB_ERR_INVALID_ARGUMENT for a table without
 *  a lifecycle or a serving table. */
HB_API hb_status hb_embedding_lifecycle_get_stats(
    const hb_embedding *emb, hb_embedding_lifecycle_stats *out);

/* ---- Versioned exports and serving updates ------------------------------ */
/*
 * Training exports numbered versions of a table: a full export (version N,
 * no base) or a delta (the rows inserted or updated and the ids evicted
 * since the export of an earlier version B). A serving table
 * (hb_embedding_open) follows them with hb_embedding_update while other
 * threads keep looking up: every lookup reads exactly one version, and
 * hb_embedding_lookup_version says which. Formats and guarantees:
 * docs/embedding-format.md ("Versioned exports and deltas"); the guide's
 * "Serving" section shows the loop.
 */

/**
 * Collective: writes version `version` (> 0, larger than every earlier
 * versioned export of this table) to path, atomically (rank 0 writes).
 * base_version 0: a full export. Otherwise a delta since this table's
 * export of base_version, which must be one of its last delta_keep_versions
 * versioned exports since it was created or loaded: an older or unknown
 * base is HB_ERR_INVALID_ARGUMENT ("export a full version"). Ranks that pass
 * different versions get HB_ERR_MISMATCH. The first versioned export turns
 * on the table's write stamps (8 bytes per row, lifecycle/row_meta.h).
 * GPU tables export full versions only (a delta: HB_ERR_UNSUPPORTED). A
 * serving table reads zeros for ids it does not hold, also where a
 * lifecycle table would read its default_value.
 */
HB_API hb_status hb_embedding_export_version(hb_embedding *emb,
                                             const char *path, int64_t version,
                                             int64_t base_version);

/**
 * Serving tables: apply the delta at path (its base must be the served
 * version, from the same exporting table) or open the newer full export at
 * path (same name and dim). Lookups from other threads go on meanwhile and
 * see the old version until the new one is complete. A damaged, truncated
 * or out-of-order file is HB_ERR_CORRUPT / HB_ERR_INVALID_ARGUMENT naming
 * the file and the versions, and the served version stays. Updates of one
 * table are serialized. Memory: two copies of the table's rows.
 */
HB_API hb_status hb_embedding_update(hb_embedding *emb, const char *path);

/**
 * hb_embedding_lookup, plus *out_version (may be NULL): the version every
 * row of this call came from (0 for a format-1 export). On a sharded table
 * *out_version is 0.
 */
HB_API hb_status hb_embedding_lookup_version(hb_embedding *emb,
                                             const int64_t *ids, size_t n,
                                             void *out, int64_t *out_version);

/** The served version (serving tables; 0 for a format-1 export or a
 *  sharded table). */
HB_API int64_t hb_embedding_version(const hb_embedding *emb);

/* ---- Pipelined collection lookup ---------------------------------------- */
/*
 * TorchRec's pipelined step: the next batch's lookup is started early (its
 * ids are checked, deduplicated and sent to their owners) and finished
 * later (the rows come back and are pooled), with the current batch's
 * dense work and its hb_collection_apply_gradients in between:
 *
 *   hb_collection_lookup_start(coll, &batch[0], out[0], NULL);
 *   for k = 0, 1, ...:
 *     hb_collection_lookup_wait(coll);             out[k] is ready
 *     hb_collection_lookup_start(coll, &batch[k + 1], out[k + 1], NULL);
 *     forward and backward of batch k, dense allreduce ...
 *     hb_collection_apply_gradients(coll, &batch[k], grad[k], NULL);
 *
 * Results are bit-identical to the unpipelined step (hb_collection_lookup
 * of batch k + 1 after the update of batch k): the owners read the rows in
 * the wait, so a lookup sees every update made before its wait, including
 * the apply_gradients called between its start and its wait.
 */

/**
 * Collective: the first half of hb_collection_lookup (its header and ids
 * rounds; the arguments as there). Until the matching wait returns, the
 * caller must not modify or free the batch's arrays (the wait reads the
 * bags and weights), out or unpooled (the wait writes them). Between start
 * and wait, on this collection, only hb_collection_apply_gradients may be
 * called: it updates the batch of the lookup before the start (and reuses
 * that lookup's plan when its ids equal it); another lookup or start is
 * HB_ERR_INVALID_ARGUMENT on every rank (the started lookup stays pending).
 * Any other collective on the context may run in between. A start that
 * fails (on any rank: a bad batch, a bad id, a mismatched call, a lost
 * peer) fails on every rank, as hb_collection_lookup does, and leaves
 * nothing pending; the lookup before it can still be updated.
 */
HB_API hb_status hb_collection_lookup_start(hb_collection *coll,
                                            const hb_jagged_batch *batch,
                                            float *out,
                                            float *const *unpooled);
/**
 * Collective: finishes the started lookup (the rows round and the
 * pooling) into the out and unpooled given to the start. Afterwards
 * hb_collection_apply_gradients of the same ids reuses its plan, as after
 * hb_collection_lookup. Without a started lookup, HB_ERR_INVALID_ARGUMENT
 * (with no exchange: every rank that made the same calls gets it). A
 * failure (e.g. HB_ERR_PEER_FAILED) leaves nothing pending. Destroying the
 * collection drops a started lookup.
 */
HB_API hb_status hb_collection_lookup_wait(hb_collection *coll);


/* ---- Asynchronous allreduce --------------------------------------------- */
/*
 * MPI_Iallreduce for host buffers: the allreduce runs on a progress
 * thread of the context, over a CPU communicator of its own (created by the
 * first start; option cpu_async_exchange), while the caller computes --
 * e.g. the embedding update, whose rounds run on the collection's channel:
 *
 *   hb_allreduce_request *req;
 *   hb_allreduce_start(ctx, grads, grads, n, HB_FLOAT32, HB_SUM, &req);
 *   hb_collection_apply_gradients(coll, &batch, grad_pooled, NULL);
 *   hb_allreduce_wait(req);                 grads are reduced
 *   dense optimizer step
 *
 * The result is bit-identical to hb_allreduce's (the same rank-order
 * reduction). Ordering: the started allreduces of a context run one at a
 * time, in start order, and complete in that order; every rank must start
 * them in the same order with matching arguments, as for the blocking
 * collectives. A mismatch (other counts, dtype or op) is HB_ERR_MISMATCH
 * from the wait on every rank where calls are checked (option
 * cpu_check_calls; on by default between ranks that share memory), a
 * timeout otherwise; a start that a peer matches with no start at all
 * (e.g. a blocking hb_allreduce) is HB_ERR_TIMEOUT on both; never a wrong
 * result. While requests are in flight any other call may be made on the
 * context (they run on other communicators): the blocking collectives,
 * embedding and collection calls, more starts. With cpu_async_exchange=0,
 * or in a world of one, the allreduce runs inside hb_allreduce_start on
 * the context's communicator and the wait only reports its outcome (a
 * failure too); with cpu_async_exchange=-1 (auto), a rank without a CPU
 * to spare for the thread may run it inside the start too
 * (docs/options.md). CUDA buffers are HB_ERR_UNSUPPORTED (hb_allreduce
 * is already asynchronous there, on the context's stream). Thread
 * safety: as the context's collectives.
 */

/** An allreduce in flight. Opaque. */
typedef struct hb_allreduce_request hb_allreduce_request;

/**
 * Collective: starts hb_allreduce(ctx, send, recv, count, dtype, op) (in
 * place when send == recv) and returns at once with *out set. Until the
 * matching hb_allreduce_wait returns, the caller must not modify or free
 * send or recv, nor read recv. A start that fails here (bad arguments, a
 * failed context) sets *out to NULL and leaves nothing in flight; its peers
 * then fail in their wait (HB_ERR_TIMEOUT at the latest).
 */
HB_API hb_status hb_allreduce_start(hb_context *ctx, const void *send,
                                    void *recv, size_t count, hb_dtype dtype,
                                    hb_reduce_op op,
                                    hb_allreduce_request **out);
/**
 * Waits for the request and frees it: HB_OK once recv holds the result, or
 * the allreduce's failure (HB_ERR_PEER_FAILED when a rank died,
 * HB_ERR_MISMATCH, HB_ERR_TIMEOUT, HB_ERR_ABORTED). Bounded by timeout_ms
 * plus 10 s; if the allreduce is still in flight then, HB_ERR_TIMEOUT and
 * the request is NOT freed (its buffers are still in use): wait again.
 * Every request must be waited for, also after hb_context_destroy (which
 * first lets the requests in flight end; the wait then reports them).
 * NULL is HB_ERR_INVALID_ARGUMENT.
 */
HB_API hb_status hb_allreduce_wait(hb_allreduce_request *req);

/* ---- Dense gradients in the collection's step --------------------------- */
/*
 * A data-parallel step sums its dense gradients across ranks (an
 * allreduce) and sends its sparse ones to their owners
 * (hb_collection_apply_gradients). hb_collection_apply_gradients_dense does
 * both in the update's own exchange: the dense floats ride beside the
 * partial sums, so the step has one lock-step round less than with
 * hb_allreduce / hb_allreduce_start beside the update, and no hand-off to
 * the allreduce's progress thread:
 *
 *   hb_collection_dense d = HB_COLLECTION_DENSE_INIT;
 *   d.send = d.recv = grads;  d.count = n;       in place
 *   hb_collection_apply_gradients_dense(coll, &batch, grad_pooled, NULL, &d);
 *   dense optimizer step on grads               summed over the ranks
 *
 * The sum is bit-identical to hb_allreduce(ctx, send, recv, count,
 * HB_FLOAT32, HB_SUM) with the default cpu_allreduce (rank order per
 * element: ((x0 + x1) + x2) + ..., whatever the world size), so a training
 * run gives the same bits either way. The floats go whole to every peer
 * (world - 1 copies each way; the allreduce's one-round form, which it
 * takes itself below 64 KiB of traffic): meant for dense parts up to a few
 * MB, beside the update's partial sums; a larger model's gradients move
 * fewer bytes in hb_allreduce's two-round form.
 */

/** The dense buffer of a step. Append-only (struct_size). */
typedef struct hb_collection_dense {
  size_t struct_size;
  const float *send; /**< count float32 of this rank */
  float *recv;       /**< count float32: the sum over ranks; may be send */
  size_t count;      /**< 0: nothing to sum (send, recv may be NULL) */
} hb_collection_dense;

#define HB_COLLECTION_DENSE_INIT \
  { sizeof(hb_collection_dense), NULL, NULL, 0 }

/**
 * Collective: hb_collection_apply_gradients(coll, batch, grad_out,
 * grad_unpooled), and recv = the sum over ranks of send (dense may be NULL:
 * then exactly hb_collection_apply_gradients). The sum rides in the
 * exchange of the partial sums, whether the step reuses its lookup's plan
 * or plans again, so either way it costs no round of its own. Every rank
 * passes the same count (0 or no dense on every rank, or the same n):
 * ranks that differ all fail with HB_ERR_MISMATCH where calls are checked
 * (option cpu_check_calls; on by default between ranks that share memory),
 * otherwise in the transport or at timeout_ms, as other mismatched
 * collectives. A bad buffer (NULL with count > 0, send and recv that
 * overlap without being equal, a struct_size too small) is
 * HB_ERR_INVALID_ARGUMENT on every rank, naming it; a lost peer
 * HB_ERR_PEER_FAILED. A failed call changes neither the tables nor recv.
 * Host collections only: with GPU tables a count > 0 is HB_ERR_UNSUPPORTED
 * on every rank (reduce the dense buffer with hb_allreduce there). Thread
 * safety: as hb_collection_apply_gradients.
 */
HB_API hb_status hb_collection_apply_gradients_dense(
    hb_collection *coll, const hb_jagged_batch *batch, const float *grad_out,
    const float *const *grad_unpooled, const hb_collection_dense *dense);

/* ---- Job checkpoints ---------------------------------------------------- */
/*
 * One checkpoint of a whole training job (docs/fault-tolerance.md): every
 * registered embedding table with its optimizer slots, named dense buffers,
 * each reader's exact position, each metric's streaming state, the step and
 * a small key/value map -- consistent across ranks (every rank at the same
 * step) and atomic.
 *
 * Layout: <dir>/JOB holds the job id; each save makes
 * <dir>/ckpt-<step, 12 digits>-<nonce>/ with the files of every rank and,
 * written last by rank 0 once every rank's files are committed (fsync +
 * rename), MANIFEST: the job id, the step, the world size, what was
 * registered, the meta map, and every file's size and checksum. A directory
 * without a valid MANIFEST is not a checkpoint, so a crash at any moment
 * leaves the previous checkpoint current. Tables use the per-table format of
 * hb_embedding_save (docs/embedding-format.md) under tables/.
 *
 * Restore at the same world size: every table, buffer, metric and reader
 * comes back bit for bit, and each reader hands out exactly the batches the
 * uninterrupted reader would have. At another world size: tables re-shard;
 * replicated buffers are restored on every rank; per-rank buffers cannot be
 * mapped (left unchanged, counted in hb_checkpoint_stats.unmapped_buffers and
 * logged); metric states are all merged into rank 0 (the merged result is
 * the same); readers re-shard the samples not yet handed out at the
 * checkpoint (their remaining byte ranges, cut evenly), each read exactly
 * once by the new world, before the later epochs start.
 *
 * Thread safety: a checkpoint handle is used from one thread at a time, the
 * thread that runs the context's collectives. With async_write, a
 * background thread writes the files and commits through the rendezvous
 * store (never a collective); the registered objects may be used at once.
 */
typedef struct hb_checkpoint hb_checkpoint;

/** hb_checkpoint_add_buffer flags (bits). */
enum hb_buffer_flag_code {
  /** The same bytes on every rank (data-parallel parameters and their
   *  optimizer slots): rank 0 writes them, every rank restores them, at any
   *  world size. */
  HB_BUFFER_REPLICATED = 0,
  /** This rank's own bytes: each rank writes its own; restored only at the
   *  same world size. Sizes may differ per rank. */
  HB_BUFFER_PER_RANK = 1,
  /** data is CUDA device memory (copied through the context's stream).
   *  HB_ERR_UNSUPPORTED without CUDA. */
  HB_BUFFER_DEVICE = 2
};

/** Append-only: the library reads min(struct_size, sizeof) bytes. */
typedef struct hb_checkpoint_config {
  size_t struct_size;
  /** The job's checkpoint directory (created with its parents); NULL or "":
   *  option checkpoint_dir (HB_CHECKPOINT_DIR), which must then be set. */
  const char *dir;
  /** Keep the last `keep` complete checkpoints (>= 1); older ones are
   *  deleted after each commit. The newest complete one is never deleted. */
  int32_t keep;
  /** 1: hb_checkpoint_save copies the state in memory and returns; a
   *  background thread writes and commits it (hb_checkpoint_wait). */
  int32_t async_write;
  /** Identity of the job. A directory whose JOB file names another job is
   *  refused (HB_ERR_INVALID_ARGUMENT naming both ids). NULL: option
   *  checkpoint_job_id (HB_CHECKPOINT_JOB_ID); "" is an id like any other. */
  const char *job_id;
  /** Bound on the commit (rank 0 waiting for every rank's files, and the
   *  others for rank 0's manifest), ms; 0: 600000. A lost peer ends it at
   *  once with HB_ERR_PEER_FAILED. */
  int64_t timeout_ms;
} hb_checkpoint_config;

#define HB_CHECKPOINT_CONFIG_INIT \
  { sizeof(hb_checkpoint_config), NULL, 3, 0, NULL, 0 }

/**
 * Collective: every rank opens the job's checkpoint directory. Rank 0
 * creates it and its JOB file, or checks the JOB file of an existing one.
 * Registers nothing yet. cfg NULL: defaults.
 */
HB_API hb_status hb_checkpoint_create(hb_context *ctx,
                                      const hb_checkpoint_config *cfg,
                                      hb_checkpoint **out);
/** Waits for a pending background write (bounded by timeout_ms), then
 *  frees the handle (not the registered objects); NULL is fine. */
HB_API void hb_checkpoint_destroy(hb_checkpoint *c);

/*
 * Registration (local, cheap). Every rank registers the same things in the
 * same order (names, kinds, replicated sizes): checked across ranks by the
 * next save or restore, HB_ERR_MISMATCH otherwise. Registered objects must
 * outlive the handle (or the next save/restore). Names: 1-64 characters of
 * [A-Za-z0-9._-], unique per kind. A table registered twice (directly and
 * through a collection) is saved once. A table on the ps tasks is written
 * by them (rows, slots and each rank's committed position; rank 0 asks
 * them) and restored into them (docs/parameter-servers.md).
 */
HB_API hb_status hb_checkpoint_add_table(hb_checkpoint *c, hb_embedding *emb);
/** Registers every table of the collection. */
HB_API hb_status hb_checkpoint_add_collection(hb_checkpoint *c,
                                              hb_collection *coll);
/** `bytes` bytes at data; flags: hb_buffer_flag_code bits. */
HB_API hb_status hb_checkpoint_add_buffer(hb_checkpoint *c, const char *name,
                                          void *data, size_t bytes,
                                          int32_t flags);
/** The reader's position: a restore rebuilds its stream from there. */
HB_API hb_status hb_checkpoint_add_reader(hb_checkpoint *c, hb_reader *r);
HB_API hb_status hb_checkpoint_add_metric(hb_checkpoint *c, const char *name,
                                          hb_metric *m);
/** Small user metadata (key 1-64 bytes, value up to 64 KiB, any bytes but
 *  NUL) saved with the next checkpoint (rank 0's map is saved); a restore
 *  replaces the map with the checkpoint's. value NULL removes the key. */
HB_API hb_status hb_checkpoint_set_meta(hb_checkpoint *c, const char *key,
                                        const char *value);
/** Writes the value (NUL-terminated) into buf; *needed (may be NULL) gets
 *  its size with the NUL. A missing key is HB_ERR_INVALID_ARGUMENT; a
 *  too-small buf is HB_ERR_INVALID_ARGUMENT with *needed set. */
HB_API hb_status hb_checkpoint_get_meta(const hb_checkpoint *c,
                                        const char *key, char *buf, size_t cap,
                                        size_t *needed);

/**
 * Collective, at a step boundary (every rank passes the same step >= 0):
 * one consistent checkpoint of everything registered, tagged with step.
 * Fires HB_EVENT_BEFORE_SAVE first (path: the new checkpoint's directory)
 * and HB_EVENT_AFTER_SAVE once it is committed, on the calling thread --
 * with async_write at the hb_checkpoint_wait, save or destroy that sees the
 * commit. With async_write it returns once the state is copied (GPU tables
 * and device buffers included); a save still in flight is waited for first
 * (a failure of that earlier save is logged and counted in
 * hb_checkpoint_stats.failed_saves, and this save goes on, so that every
 * rank makes the same calls). A failed save leaves the previous checkpoint
 * current.
 */
HB_API hb_status hb_checkpoint_save(hb_checkpoint *c, int64_t step);
/** Waits until the last save is committed on every rank; its status (HB_OK
 *  when nothing is pending). With async_write, call it on every rank (it
 *  waits for rank 0's verdict). */
HB_API hb_status hb_checkpoint_wait(hb_checkpoint *c);

/**
 * Collective: finds the newest complete checkpoint in the directory and
 * restores everything registered from it; *step = its step, or -1 when
 * there is none (a fresh start: HB_OK, nothing changed). A damaged newest
 * checkpoint (a file missing, truncated or failing its checksum) is passed
 * over for the previous complete one, with a warning on stderr naming it;
 * hb_checkpoint_stats.skipped_damaged counts them and restored_path names
 * the one used. A checkpoint of another job, or of other registrations
 * (names, kinds, sizes), is refused: HB_ERR_INVALID_ARGUMENT naming what
 * differs, nothing changed. Fires HB_EVENT_BEFORE_LOAD / AFTER_LOAD.
 * Works at another world size (see above).
 */
HB_API hb_status hb_checkpoint_restore_latest(hb_checkpoint *c, int64_t *step);
/** Collective: restores the checkpoint at path (a ckpt-* directory, e.g.
 *  from hb_checkpoint_latest); no fallback. *step (may be NULL) = its step. */
HB_API hb_status hb_checkpoint_restore(hb_checkpoint *c, const char *path,
                                       int64_t *step);
/**
 * No context: the newest complete checkpoint in dir (its MANIFEST valid and
 * every file it names present with its size), for followers such as an
 * evaluator or a serving host. Writes its path into path_buf (cap bytes,
 * NUL included; *needed, may be NULL, gets the size needed; a too-small
 * buffer is HB_ERR_INVALID_ARGUMENT) and *step. HB_OK with *step = -1 and
 * an empty path when there is none (or dir does not exist).
 */
HB_API hb_status hb_checkpoint_latest(const char *dir, char *path_buf,
                                      size_t cap, size_t *needed,
                                      int64_t *step);

/** This rank's view of its checkpoint handle. Append-only (struct_size). */
typedef struct hb_checkpoint_stats {
  size_t struct_size;
  int64_t saves;           /**< saves started */
  int64_t last_step;       /**< step of the last save started; -1: none */
  int64_t committed_step;  /**< step of the last save committed; -1: none */
  int32_t pending;         /**< 1 while an async write is in flight */
  int32_t skipped_damaged; /**< damaged checkpoints the last restore passed */
  int64_t restored_step;   /**< -1: nothing restored */
  int32_t restored_world;  /**< world size that wrote it; 0: none */
  int32_t unmapped_buffers; /**< per-rank buffers a restore left unchanged */
  const char *restored_path; /**< "" when none; valid until the next call */
  uint64_t state_bytes;    /**< registered state this rank saved last */
  uint64_t file_bytes;     /**< bytes this rank wrote in its last commit */
  double blocked_seconds;  /**< time the last save blocked its caller */
  double write_seconds;    /**< time this rank spent writing its files */
  int64_t failed_saves;    /**< saves that failed (async: seen later) */
} hb_checkpoint_stats;

#define HB_CHECKPOINT_STATS_INIT                                           \
  {                                                                        \
    sizeof(hb_checkpoint_stats), 0, -1, -1, 0, 0, -1, 0, 0, NULL, 0, 0, 0.0, \
        0.0, 0                                                             \
  }

HB_API hb_status hb_checkpoint_get_stats(const hb_checkpoint *c,
                                         hb_checkpoint_stats *out);

/* ---- Evaluator ---------------------------------------------------------- */
/*
 * A follower of a training job (docs/evaluator.md): TensorFlow's evaluator
 * task. It watches the job's checkpoint directory, restores each new
 * complete checkpoint at its own world size (tables re-shard), lets the
 * program score its own data with the metrics it added, and appends one
 * JSON line per checkpoint to a log: {"step":S,"time":T,"<metric>":V,...}.
 *
 * It restores a subset of what training registered, matched by name: the
 * tables and replicated buffers it adds (each as training registered it:
 * same table spec and optimizer, same buffer size). Training's readers,
 * metrics and per-rank buffers are ignored. It never writes into the
 * checkpoint directory.
 *
 * Training ends for it when hb_checkpoint_finish has marked the directory
 * and no newer checkpoint is left. Checkpoints are evaluated oldest first,
 * each once, in step order; one that `keep` removes before the evaluator
 * could load it is skipped (logged, counted in stats.skipped).
 *
 * An evaluator's context is its own (a TF_CONFIG task of type "evaluator",
 * or hbrun --evaluator): one process normally; collective over that
 * context when it has several ranks. One thread at a time.
 */
typedef struct hb_evaluator hb_evaluator;

/** Append-only: the library reads min(struct_size, sizeof) bytes. */
typedef struct hb_evaluator_config {
  size_t struct_size;
  /** The job's checkpoint directory (it may not exist yet); NULL or "":
   *  option checkpoint_dir (HB_CHECKPOINT_DIR), which must then be set. */
  const char *dir;
  /** The job id training uses; a directory of another job is refused.
   *  NULL: option checkpoint_job_id (HB_CHECKPOINT_JOB_ID). */
  const char *job_id;
  /** The JSON-lines log (created with the first line); NULL or "": none
   *  (hb_evaluator_report still returns the values). An existing log is
   *  appended to, and the evaluator starts after its last line's step: a
   *  restarted evaluator logs no checkpoint twice. */
  const char *log_path;
  /** How often hb_evaluator_next looks at the directory, ms; 0: 200. */
  int64_t poll_ms;
  /** The longest hb_evaluator_next waits for a new checkpoint or the end
   *  of training, ms (HB_ERR_TIMEOUT after it); 0: 600000. */
  int64_t timeout_ms;
} hb_evaluator_config;

#define HB_EVALUATOR_CONFIG_INIT \
  { sizeof(hb_evaluator_config), NULL, NULL, NULL, 0, 0 }

/** Collective over ctx. Checks the configuration and, when the directory
 *  exists already, that it belongs to the job. Registers nothing. */
HB_API hb_status hb_evaluator_create(hb_context *ctx,
                                     const hb_evaluator_config *cfg,
                                     hb_evaluator **out);
/** Frees the handle (not the registered objects); NULL is fine. */
HB_API void hb_evaluator_destroy(hb_evaluator *ev);

/** What each checkpoint restores (local; registered objects must outlive
 *  the handle). A table as hb_checkpoint_add_table registers it. */
HB_API hb_status hb_evaluator_add_table(hb_evaluator *ev, hb_embedding *emb);
HB_API hb_status hb_evaluator_add_collection(hb_evaluator *ev,
                                             hb_collection *coll);
/** A buffer training registered under name (replicated; flags 0 or
 *  HB_BUFFER_DEVICE), restored on every rank of the evaluator. */
HB_API hb_status hb_evaluator_add_buffer(hb_evaluator *ev, const char *name,
                                         void *data, size_t bytes,
                                         int32_t flags);
/** A metric the program updates on its data after each hb_evaluator_next
 *  (which resets it); its result goes into the log under name (1-64 of
 *  [A-Za-z0-9._-]). Create it on the evaluator's context. */
HB_API hb_status hb_evaluator_add_metric(hb_evaluator *ev, const char *name,
                                         hb_metric *m);

/**
 * Collective: waits (polling, bounded by timeout_ms) for the oldest
 * complete checkpoint with a step above the last one evaluated, restores it
 * and resets the metrics; *step = its step. *step = -1 (HB_OK) once training
 * has finished and no newer checkpoint is left. HB_ERR_TIMEOUT when neither
 * comes in time; HB_ERR_INVALID_ARGUMENT for another job's directory or a
 * checkpoint without what was added (naming it).
 */
HB_API hb_status hb_evaluator_next(hb_evaluator *ev, int64_t *step);
/**
 * Collective: every metric's result (hb_metric_result) into values (one
 * per metric in the order added; may be NULL), and, with a log, rank 0
 * appends the checkpoint's JSON line (a non-finite value is null). The log
 * is replaced atomically (rename), so a reader never sees half a line.
 */
HB_API hb_status hb_evaluator_report(hb_evaluator *ev, double *values);

/** Append-only (struct_size). */
typedef struct hb_evaluator_stats {
  size_t struct_size;
  int64_t evaluated; /**< checkpoints restored by hb_evaluator_next */
  int64_t reported;  /**< lines hb_evaluator_report wrote (or would have) */
  int64_t skipped;   /**< checkpoints gone or damaged before they loaded */
  int64_t last_step; /**< the step last restored (or, before that, the
                          last step of an existing log); -1: none */
  int32_t finished;  /**< 1 once hb_evaluator_next returned -1 */
  /** The job's dynamic-split queue as the checkpoint last restored saved it
   *  (docs/parameter-servers.md): the epoch being handed out (split_epochs
   *  once every split was handed out); -1 when that checkpoint has no
   *  queue (then the fields below are 0). */
  int64_t split_epoch;
  int64_t split_epochs;  /**< ps_split_epochs */
  int64_t splits_done;   /**< splits finished, all epochs together */
  /** Splits handed out and unfinished (held, or given back by a lost
   *  worker): their committed offsets through hb_evaluator_open_splits. */
  int64_t splits_open;
  /** Samples (or reader bytes) trained: finished splits, and open ones up
   *  to their committed offsets; and of every epoch together. */
  int64_t split_samples_done;
  int64_t split_samples_total;
} hb_evaluator_stats;

#define HB_EVALUATOR_STATS_INIT \
  { sizeof(hb_evaluator_stats), 0, 0, 0, -1, 0, -1, 0, 0, 0, 0, 0 }

HB_API hb_status hb_evaluator_get_stats(const hb_evaluator *ev,
                                        hb_evaluator_stats *out);

/**
 * Training side, collective, after the last save: waits for it to commit,
 * then marks the directory finished (the file FINISHED, with the last
 * committed step) so followers end once they have evaluated it.
 * hb_checkpoint_create of a job that trains again removes the mark.
 */
HB_API hb_status hb_checkpoint_finish(hb_checkpoint *c);


/* ---- Parameter servers (src/ps) ------------------------------------------- */
/*
 * Parameter-server mode (docs/parameter-servers.md). The same program runs
 * on every task, as in TensorFlow. With ps tasks in TF_CONFIG ("ps": [...]),
 * under hbrun --ps N, or with HB_PS_HOSTS, a ps task calls hb_context_serve
 * and the workers (chief and workers) place tables and dense buffers on the
 * ps tasks: id `id` of a table with placement HB_PLACEMENT_PS lives on ps
 * task id mod num_ps. Workers do not wait for each other: the ps tasks
 * apply each table's optimizer as pushes arrive, no worker runs more than
 * `staleness` pushes ahead of the slowest live one (option staleness; 0 is
 * synchronous and gives the bits of collective mode), and a lost worker
 * holds nobody back for longer than peer_timeout_ms. A ps task that dies
 * fails every worker's calls with HB_ERR_PEER_FAILED.
 *
 * On a worker, hb_embedding_lookup and hb_embedding_apply_gradients of a ps
 * table are not collective (each worker calls them at its own pace; the
 * same ids, dedup and summation order as a sharded table's), collections
 * take ps tables (all of a collection's tables on the ps tasks), and save,
 * load and export are made by one worker for the whole table (call them on
 * the chief): each ps task writes its shard in the checkpoint format of
 * sharded tables, so checkpoints move between the two placements and any
 * world size. Every worker creates every ps table (same config), as for a
 * sharded table. The workers form their collective world (collectives,
 * barriers, worker-sharded tables, merged metrics) when they first use it
 * (option ps_collective: at hb_context_create); a job that uses only ps
 * tables and dense buffers never does, and survives lost workers.
 */

enum hb_placement_code {
  HB_PLACEMENT_WORKERS = 0, /**< sharded over the ranks (collective mode) */
  HB_PLACEMENT_PS = 1       /**< on the ps tasks */
};

/** Number of ps tasks of the job (0: collective mode; -1 for NULL). */
HB_API int32_t hb_context_num_ps(const hb_context *ctx);

/**
 * On a ps task (hb_context_task_type is "ps"): serve the workers' tables
 * and dense buffers until the job ends. Returns HB_OK once every worker has
 * left (destroyed its context); HB_ERR_PEER_FAILED when workers were lost
 * and none came back within connect_timeout_ms (the time a restarted one
 * has to rejoin); HB_ERR_TIMEOUT when no worker came within
 * connect_timeout_ms; HB_ERR_ABORTED after hb_context_abort.
 * HB_ERR_INVALID_ARGUMENT on a worker. One call, in the same program the
 * workers run (the ps needs the program's options and nothing else: see
 * docs/parameter-servers.md for why it is a call and not hbrun's job).
 */
HB_API hb_status hb_context_serve(hb_context *ctx);

/**
 * The reader position this worker's next pushes carry (an opaque blob of
 * at most 64 KiB, e.g. a sample counter or a serialized reader state): each
 * ps task commits it with the push's gradients, atomically.
 */
HB_API hb_status hb_ps_set_position(hb_context *ctx, const void *data,
                                    size_t len);
/**
 * After a restart: the position this worker committed with its last step
 * applied everywhere (the fewest steps of any of its tables on any ps task)
 * into buf (cap bytes; *needed gets the size, may be NULL), and that step
 * count into *step (0 and an empty position when nothing was committed).
 * Call it after creating the tables: they resume at *step, and the ps tasks
 * drop pushes of steps they already have, so a worker that resumes reading
 * at this position applies every sample exactly once.
 */
HB_API hb_status hb_ps_position(hb_context *ctx, void *buf, size_t cap,
                                size_t *needed, int64_t *step);

/** Counters of the ps tasks (summed; max_staleness is the largest). */
typedef struct hb_ps_stats {
  size_t struct_size;
  int64_t pulls, pushes;          /**< per table and ps task */
  int64_t rows_pulled, rows_pushed;
  int64_t rounds;                 /**< staleness 0: optimizer rounds */
  /** The largest lead of a pushing worker over the slowest live one. */
  int64_t max_staleness;
  int64_t bound_violations;       /**< pushes past the bound (always 0) */
  int64_t duplicate_pushes;       /**< replayed steps dropped */
  int64_t workers_lost, workers_rejoined;
  int64_t busy_us;                /**< time the ps tasks spent serving */
  /** Workers that have left (destroyed their context) every ps task. */
  int64_t workers_left;
  /** Workers that have left or are lost (silent past peer_timeout_ms, or
   *  their connection closed) on every ps task, now: a lost one that is
   *  started again comes back. */
  int64_t workers_gone;
} hb_ps_stats;

#define HB_PS_STATS_INIT \
  { sizeof(hb_ps_stats), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }

HB_API hb_status hb_ps_get_stats(hb_context *ctx, hb_ps_stats *out);

/**
 * Dense parameters on the ps tasks (tensorpack's parameter_server layout):
 * pull before the step, push the gradients after; the ps tasks apply the
 * buffer's optimizer element-wise (the tables' optimizers). The buffer is
 * split into rows of at most 256 floats spread over the ps tasks. Staleness
 * and summation as for tables. Every worker creates it with the same
 * config; init (count floats, NULL: zeros) is taken from the worker that
 * creates it first.
 */
typedef struct hb_ps_dense hb_ps_dense;

typedef struct hb_ps_dense_config {
  size_t struct_size;
  const char *name;      /**< unique among the job's ps tables */
  int64_t count;         /**< float32 elements, > 0 */
  const float *init;     /**< count initial values, or NULL (zeros) */
  int32_t optimizer;     /**< hb_optimizer_code */
  double learning_rate;
  double initial_accumulator;
  double beta1, beta2, epsilon;
  double l1, l2, lr_power;
} hb_ps_dense_config;

#define HB_PS_DENSE_CONFIG_INIT                                             \
  {                                                                         \
    sizeof(hb_ps_dense_config), NULL, 0, NULL, HB_OPT_SGD, 0.01, 0.1, 0.9,  \
        0.999, 1e-8, 0.0, 0.0, -0.5                                         \
  }

HB_API hb_status hb_ps_dense_create(hb_context *ctx,
                                    const hb_ps_dense_config *cfg,
                                    hb_ps_dense **out);
HB_API void hb_ps_dense_destroy(hb_ps_dense *d);
/** out: count floats, the buffer as of this worker's step. */
HB_API hb_status hb_ps_dense_pull(hb_ps_dense *d, float *out);
/** grads: count floats; one optimizer step (summed over the workers of a
 *  round with staleness 0). */
HB_API hb_status hb_ps_dense_push(hb_ps_dense *d, const float *grads);
/** Registers the buffer in a job checkpoint (hb_checkpoint_add_table for a
 *  dense buffer): saves and restores its values and optimizer slots on the
 *  ps tasks. It is saved as a table of the buffer's name, rows of
 *  min(count, 256) floats (an evaluator reads it with such a table). */
HB_API hb_status hb_checkpoint_add_ps_dense(hb_checkpoint *c, hb_ps_dense *d);

/* ---- Dynamic splits (src/ps; docs/parameter-servers.md) ------------------ */
/*
 * With option ps_split_samples = N > 0 (read by ps task 0), the job's input,
 * samples [0, N) -- or the bytes of a reader's files laid end to end
 * (hb_reader_total_bytes, hb_reader_seek_split) -- is cut into splits of
 * ps_split_size that ps task 0 hands out on demand, ps_split_epochs times,
 * each epoch in an order drawn from ps_split_seed: a worker asks for the
 * next split when it has finished its last, so a fast worker takes more.
 *
 * Every sample exactly once: a worker's position inside its split rides
 * with its pushes (hb_ps_split_commit in place of hb_ps_set_position), so
 * a restarted worker resumes its own split where its pushes were applied,
 * and a worker lost for good gives its split back to the queue at its
 * committed offset, to be finished by whoever asks next.
 *
 * The loop of a worker (after creating its tables, as hb_ps_position):
 *   hb_ps_split sp = HB_PS_SPLIT_INIT;
 *   while (hb_ps_split_next(ctx, &sp) == HB_OK && sp.split >= 0)
 *     for (int64_t at = sp.from; at < sp.end; at = next) {
 *       next = min(sp.end, at + batch);
 *       hb_ps_split_commit(ctx, sp.split, next);  // before the pushes
 *       lookup, compute, apply_gradients of samples [at, next)
 *     }
 * Thread safety: one thread of a worker at a time, as its pushes.
 */
typedef struct hb_ps_split {
  size_t struct_size;  /**< sizeof(hb_ps_split) */
  int64_t split;       /**< split number in its epoch; -1: none left */
  int64_t epoch;       /**< 0-based */
  int64_t begin, end;  /**< its samples (or bytes): [begin, end) */
  /** Where to start: begin, or where the pushes of a worker that held the
   *  split before (this one before a restart, or a lost one) stopped. */
  int64_t from;
  /** When greater than from: the first batch must end exactly here. A lost
   *  holder's last batch reached some ps tables and not others; pushed again
   *  whole, the tables that have it drop it (hb_ps_split_commit refuses any
   *  other first offset). Workers with equal batch sizes meet it anyway. */
  int64_t replay_end;
} hb_ps_split;

#define HB_PS_SPLIT_INIT { sizeof(hb_ps_split), -1, 0, 0, 0, 0, 0 }

/**
 * This worker's next split into *out (out->struct_size set by the caller):
 * its own unfinished one first (after a restart, resumed where its pushes
 * were applied), then one given back by a lost worker, then the next of the
 * current epoch's order. out->split = -1 when every split of every epoch is
 * handed out (finished or held by another worker). Tells the queue first
 * that the split of the last hb_ps_split_commit has reached that offset
 * (its pushes were answered). HB_ERR_INVALID_ARGUMENT in collective mode or
 * when the job has no splits (ps_split_samples 0 on ps task 0).
 */
HB_API hb_status hb_ps_split_next(hb_context *ctx, hb_ps_split *out);

/** hb_ps_split_try's out->split when no split can be handed out now but
 *  other workers hold unfinished ones (one may come back): ask again. */
#define HB_PS_SPLIT_LATER (-2)
/**
 * hb_ps_split_next without waiting: when every split left is held by other
 * workers it returns HB_OK at once with out->split = HB_PS_SPLIT_LATER
 * (where hb_ps_split_next waits up to timeout_ms for one to finish or come
 * back); meanwhile this worker counts as idle on every ps task (it does not
 * hold the staleness bound back) until its next pull or push. For a loop
 * that must reach every collective job checkpoint (hb_checkpoint_save at
 * the same step on every worker) while the queue has nothing for it: such
 * a loop makes an empty step (no pull or push), then asks again. The queue
 * is saved with the tables of a job checkpoint and restored with them.
 * Otherwise as hb_ps_split_next (out->split -1: every split is handed out).
 */
HB_API hb_status hb_ps_split_try(hb_context *ctx, hb_ps_split *out);
/**
 * At a step boundary, before the step's pushes (in place of
 * hb_ps_set_position): the step that follows consumes the samples of
 * `split` (the one hb_ps_split_next returned) up to `offset` (at or after
 * its last offset, at most end; end finishes the split). The position {split, epoch, offset}
 * rides with the step's pushes, committed atomically with them by each ps
 * task; ps task 0's queue learns the offset at this worker's next
 * hb_ps_split_commit or hb_ps_split_next, once those pushes were answered.
 * HB_ERR_INVALID_ARGUMENT when the split is not this worker's or the offset
 * is outside it or behind the last one.
 */
HB_API hb_status hb_ps_split_commit(hb_context *ctx, int64_t split,
                                    int64_t offset);

/**
 * A reader's files as the input of dynamic splits: their bytes laid end to
 * end in the order given (after glob expansion), *out the total (set
 * ps_split_samples to it; ps_split_size is then bytes per split, a few MiB).
 * A split [begin, end) holds the lines that start in (begin, end] -- with
 * the rule of byte-range sharding above: a line at a file's first byte
 * belongs to the split whose range holds that byte -- so every line is in
 * exactly one split. Plain files only (a gzip file cannot be cut:
 * HB_ERR_UNSUPPORTED naming it).
 */
HB_API hb_status hb_reader_total_bytes(const hb_reader *r, int64_t *out);
/**
 * The open splits of the queue in the checkpoint an evaluator restored last
 * (hb_evaluator_stats.splits_open of them; evaluator: docs/evaluator.md):
 * up to cap into out (an array of structs, out[0].struct_size set by the
 * caller and used for every element), *count = how many there are (may be
 * more than cap). Each one's `from` is its committed offset: how far
 * training got inside it. *count = 0 when that checkpoint has no queue.
 */
HB_API hb_status hb_evaluator_open_splits(const hb_evaluator *ev,
                                          hb_ps_split *out, size_t cap,
                                          size_t *count);
/**
 * The reader reads split [from, end) of those bytes next (from: the
 * split's `from`), replacing what it was reading (its sharding, epochs and
 * shuffle are not used: the queue orders the splits); hb_reader_next then
 * returns its lines in batches and NULL at its end. Batches of one split
 * have epoch 0. Its position is the one committed with the pushes
 * (hb_ps_split_commit), not a job checkpoint's: do not also register it
 * with hb_checkpoint_add_reader.
 */
HB_API hb_status hb_reader_seek_split(hb_reader *r, int64_t from, int64_t end);
/**
 * The offset to commit for the lines handed out so far in the current split
 * (hb_ps_split_commit after hb_reader_next): a reader seeked to it reads
 * exactly the lines not handed out yet; the split's end once its last line
 * was handed out. HB_ERR_INVALID_ARGUMENT when the reader is not reading a
 * split.
 */
HB_API hb_status hb_reader_split_offset(const hb_reader *r, int64_t *out);
#endif

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HB_H */
