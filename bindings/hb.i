/*
 * hb.i - the part of the SWIG interface shared by every language.
 *
 * Each language file (python/hb_python.i, java/hb_java.i, go/hb_go.i) sets
 * %module, defines the typemaps for the parameter *roles* listed below and
 * then %includes this file, which maps hb.h's parameters onto those roles and
 * wraps the whole header. The idiomatic API of each language (dtype from the
 * array type, handles that close themselves, configs with defaults) is a thin
 * hand-written layer on top of this low-level module.
 *
 * Roles (typemap names the language files must define):
 *   hb_status                    failure -> the language's error, built in
 *                                the same C call (hb_last_error is
 *                                thread-local; Go may switch threads).
 *   HB_HANDLE                    hb_context * etc. as an opaque integer.
 *   HB_HANDLE_OUT                hb_context **out etc.: the new handle.
 *   HB_BUFFER_IN / HB_BUFFER_OUT untyped host buffers (void *), zero-copy
 *                                where possible; NULL: None / null / nil.
 *   HB_ARRAY_IN / HB_ARRAY_OUT   the same for typed pointers (const float *,
 *                                const int64_t *, int32_t *, float *).
 *   (HB_BYTES_OUT, HB_BYTES_LEN) (void **, size_t *) set to a malloc'd blob
 *                                of any bytes (freed): bytes / byte[] /
 *                                []byte.
 *   (HB_BUFS, HB_COUNTS, HB_N)   (void *const *, const size_t *, size_t): a
 *                                list of writable buffers.
 *   (HB_STRINGS, HB_N)           (const char *const *, size_t): strings.
 *   HB_STATIC_STRING_OUT         const char ** set to a static string.
 *   HB_STRING_OUT                char ** set to a malloc'd string (freed).
 *   (HB_FN, HB_USER_DATA)        (hb_listener_fn, void *): a callback.
 *   int32_t/int64_t/double *OUTPUT  scalar results.
 */

%{
#include <stdlib.h>
#include <string.h>

#include "hb.h"

static char *hbw_strdup(const char *s) {  /* strdup is not C99 */
  size_t n = strlen(s) + 1;
  char *copy = (char *)malloc(n);
  if (copy) memcpy(copy, s, n);
  return copy;
}
%}

%include <stdint.i>
%include <typemaps.i>

/* hb_status is special as a result only. */
%apply int32_t { hb_status status };

/* ---- Handles ------------------------------------------------------------ */
%apply void *HB_HANDLE { hb_context *, const hb_context *, hb_embedding *,
                         const hb_embedding *, hb_metric *, const hb_metric *,
                         void *stream /* a cudaStream_t, as an integer */ };
%apply void **HB_HANDLE_OUT { hb_context **out, hb_embedding **out,
                              hb_metric **out };

/* ---- Buffers ------------------------------------------------------------ */
%apply const void *HB_BUFFER_IN { const void *send, const void *grads };
%apply void *HB_BUFFER_OUT { void *recv, void *out };
%apply const float *HB_ARRAY_IN { const float *labels, const float *preds,
                                  const float *weights };
%apply const int64_t *HB_ARRAY_IN { const int64_t *groups, const int64_t *ids,
                                    const int64_t *recv_counts,
                                    const int64_t *recv_offsets,
                                    const int64_t *send_counts,
                                    const int64_t *send_offsets };
%apply int32_t *HB_ARRAY_OUT { int32_t *out_build_subnetwork };
%apply (void *const *HB_BUFS, const size_t *HB_COUNTS, size_t HB_N) {
  (void *const *bufs, const size_t *counts, size_t n) };

/* ---- Scalar and string results ------------------------------------------ */
%apply int32_t *OUTPUT { int32_t *out_continue, int32_t *out_feed_empty,
                         int32_t *out_build_ensemble,
                         int32_t *out_train_subnetworks };
%apply int64_t *OUTPUT { int64_t *begin, int64_t *end, int64_t *out_version };
%apply double *OUTPUT { double *out };
%apply const char **HB_STATIC_STRING_OUT { const char **name, const char **type,
                              const char **default_value, const char **doc };
%apply char **HB_STRING_OUT { char **out_str };
%apply (const char *const *HB_STRINGS, size_t HB_N) {
  (const char *const *worker_hosts, size_t n_workers),
  (const char *const *ps_hosts, size_t n_ps) };
%apply (hb_listener_fn HB_FN, void *HB_USER_DATA) {
  (hb_listener_fn fn, void *user_data) };

/* ---- Options structs: constructed with their HB_*_INIT defaults ---------- */
/* The defaults live only in hb.h; every language reads them from here. */
%immutable struct_size;
/* String members own a malloc'd copy, freed on reassignment and by the
 * destructors below (SWIG's default for const char * never frees). */
%typemap(memberin) const char *name, const char *rendezvous, const char *options {
  free((char *)$1);
  $1 = $input ? hbw_strdup($input) : NULL;
}
%extend hb_context_options {
  hb_context_options() {
    hb_context_options init = HB_CONTEXT_OPTIONS_INIT;
    hb_context_options *o = (hb_context_options *)malloc(sizeof *o);
    if (o) *o = init;
    return o;
  }
  ~hb_context_options() {
    free((char *)$self->rendezvous);
    free((char *)$self->options);
    free($self);
  }
}
%extend hb_embedding_config {
  hb_embedding_config() {
    hb_embedding_config init = HB_EMBEDDING_CONFIG_INIT;
    hb_embedding_config *c = (hb_embedding_config *)malloc(sizeof *c);
    if (c) *c = init;
    return c;
  }
  ~hb_embedding_config() {
    free((char *)$self->name);
    free((void *)$self->lifecycle);
    free($self);
  }
}
%extend hb_metric_config {
  hb_metric_config() {
    hb_metric_config init = HB_METRIC_CONFIG_INIT;
    hb_metric_config *c = (hb_metric_config *)malloc(sizeof *c);
    if (c) *c = init;
    return c;
  }
  ~hb_metric_config() { free($self); }
}

/* ---- Calls whose C shape (caller-sized char buffers) does not map --------- */
/* Same calls, returning a malloc'd string instead of filling buf/cap. */
%ignore hb_context_get_option;
%ignore hb_tf_config_build;
%rename(hb_context_get_option) hbw_context_get_option;
%rename(hb_tf_config_build) hbw_tf_config_build;
%inline %{
static hb_status hbw_context_get_option(const hb_context *ctx, const char *name,
                                        char **out_str) {
  char small[256];
  size_t needed = 0;
  hb_status s = hb_context_get_option(ctx, name, small, sizeof small, &needed);
  *out_str = NULL;
  if (s == HB_OK) {
    *out_str = hbw_strdup(small);
  } else if (needed > sizeof small) {  /* too small: ask again at full size */
    *out_str = (char *)malloc(needed);
    if (!*out_str) return HB_ERR_OUT_OF_MEMORY;
    s = hb_context_get_option(ctx, name, *out_str, needed, NULL);
  }
  if (s != HB_OK) {  /* the binding raises: nothing to hand back */
    free(*out_str);
    *out_str = NULL;
  }
  return s;
}

static hb_status hbw_tf_config_build(const char *task_type, int32_t task_id,
                                     const char *const *worker_hosts,
                                     size_t n_workers,
                                     const char *const *ps_hosts, size_t n_ps,
                                     int32_t has_evaluator, char **out_str) {
  size_t needed = 0;
  hb_status s;
  *out_str = NULL;
  s = hb_tf_config_build(task_type, task_id, worker_hosts, n_workers, ps_hosts,
                         n_ps, has_evaluator, NULL, 0, &needed);
  if (s != HB_OK && needed == 0) return s;  /* a real error, not the size */
  *out_str = (char *)malloc(needed);
  if (!*out_str) return HB_ERR_OUT_OF_MEMORY;
  s = hb_tf_config_build(task_type, task_id, worker_hosts, n_workers, ps_hosts,
                         n_ps, has_evaluator, *out_str, needed, NULL);
  if (s != HB_OK) {
    free(*out_str);
    *out_str = NULL;
  }
  return s;
}
%}

/* ---- Reader (hb.h EXPERIMENTAL section) ----------------------------------- */
/* The wrappers cover the reader: the C side and SWIG's own parse both see
 * the EXPERIMENTAL section. */
%begin %{
#ifndef HB_EXPERIMENTAL
#define HB_EXPERIMENTAL
#endif
%}
#define HB_EXPERIMENTAL
%apply void *HB_HANDLE { hb_reader *, const hb_reader *, hb_reader_batch *,
                         const hb_reader_batch * };
%apply void **HB_HANDLE_OUT { hb_reader **out, hb_reader_batch **out };
%apply (const char *const *HB_STRINGS, size_t HB_N) {
  (const char *const *paths, size_t num_paths) };
%apply void *HB_BUFFER_OUT { void *labels_out, void *dense_out,
                             void *offsets_out, void *ids_out };
/* A batch is a handle; its fields come through the calls below (Python
 * reads them in place, see hb/reader.py). */
%ignore hb_reader_batch;
%ignore hb_reader_parse_line;
%typemap(memberin) const char *columns {
  free((char *)$1);
  $1 = $input ? hbw_strdup($input) : NULL;
}
%extend hb_reader_config {
  hb_reader_config() {
    hb_reader_config init = HB_READER_CONFIG_INIT;
    hb_reader_config *c = (hb_reader_config *)malloc(sizeof *c);
    if (c) *c = init;
    return c;
  }
  ~hb_reader_config() {
    free((char *)$self->columns);
    free($self);
  }
}
%inline %{
/* Sizes of a batch: [size, num_dense, num_sparse, num_ids, epoch]. */
static int64_t hbw_reader_batch_info(const hb_reader_batch *b, int32_t field) {
  if (!b) return -1;
  switch (field) {
    case 0: return b->size;
    case 1: return b->num_dense;
    case 2: return b->num_sparse;
    case 3: return b->num_ids;
    case 4: return b->epoch;
    default: return -1;
  }
}
/* Copies a batch out (Java, Go): labels_out float[size], dense_out
 * float[size * num_dense], offsets_out int64[num_sparse * size + 1],
 * ids_out int64[num_ids]; any may be NULL. The caller sizes them from
 * hbw_reader_batch_info. */
static hb_status hbw_reader_batch_copy(const hb_reader_batch *b,
                                       void *labels_out, void *dense_out,
                                       void *offsets_out, void *ids_out) {
  if (!b) return HB_ERR_INVALID_ARGUMENT;
  if (labels_out) memcpy(labels_out, b->labels, (size_t)b->size * sizeof(float));
  if (dense_out)
    memcpy(dense_out, b->dense,
           (size_t)(b->size * b->num_dense) * sizeof(float));
  if (offsets_out)
    memcpy(offsets_out, b->offsets,
           (size_t)(b->num_sparse * b->size + 1) * sizeof(int64_t));
  if (ids_out) memcpy(ids_out, b->ids, (size_t)b->num_ids * sizeof(int64_t));
  return HB_OK;
}
%}

/* ---- Parameter servers (EXPERIMENTAL in hb.h) ---------------------------- */
/* hb_context_serve and hb_context_num_ps are bound as they are. A dense
 * buffer is a handle; its config as the other configs, its init array
 * passed to the create call (no pointer member to keep alive); the pull
 * writes into the caller's float array (the language layers check its
 * size: C cannot see it). The position comes back malloc'd (it may hold
 * any bytes, so not as a string) and the stats as 12 int64. */
%apply void *HB_HANDLE { hb_ps_dense *, const hb_ps_dense * };
%apply void **HB_HANDLE_OUT { hb_ps_dense **out };
%apply const void *HB_BUFFER_IN { const void *data };
%apply const float *HB_ARRAY_IN { const float *init, const float *grads };
%apply float *HB_ARRAY_OUT { float *out };
%apply void *HB_BUFFER_OUT { void *stats, void *split_out };
/* Dynamic splits of a reader's bytes: hb_reader_total_bytes and
 * hb_reader_split_offset return their int64. */
%apply int64_t *OUTPUT { int64_t *out };
%apply (void **HB_BYTES_OUT, size_t *HB_BYTES_LEN) {
  (void **out_bytes, size_t *out_len) };
%apply int64_t *OUTPUT { int64_t *step };
%ignore hb_ps_dense_config::init;
%extend hb_ps_dense_config {
  hb_ps_dense_config() {
    hb_ps_dense_config init = HB_PS_DENSE_CONFIG_INIT;
    hb_ps_dense_config *c = (hb_ps_dense_config *)malloc(sizeof *c);
    if (c) *c = init;
    return c;
  }
  ~hb_ps_dense_config() {
    free((char *)$self->name);
    free($self);
  }
}
%ignore hb_ps_stats;
%ignore hb_ps_get_stats;
%ignore hb_ps_position;
%ignore hb_ps_dense_create;
%ignore hb_ps_split;
%ignore hb_ps_split_next;
%rename(hb_ps_split_next) hbw_ps_split_next;
%ignore hb_ps_split_try;
%rename(hb_ps_split_try) hbw_ps_split_try;
%ignore hb_evaluator_open_splits;
%rename(hb_ps_get_stats) hbw_ps_get_stats;
%rename(hb_ps_position) hbw_ps_position;
%rename(hb_ps_dense_create) hbw_ps_dense_create;
%inline %{
/* stats: 13 int64 -- pulls, pushes, rows_pulled, rows_pushed, rounds,
 * max_staleness, bound_violations, duplicate_pushes, workers_lost,
 * workers_rejoined, busy_us, workers_left, workers_gone (hb_ps_stats in
 * order). */
static hb_status hbw_ps_get_stats(hb_context *ctx, void *stats) {
  hb_ps_stats st = HB_PS_STATS_INIT;
  hb_status s = hb_ps_get_stats(ctx, &st);
  if (s == HB_OK) {
    int64_t v[13] = {st.pulls, st.pushes, st.rows_pulled, st.rows_pushed,
                     st.rounds, st.max_staleness, st.bound_violations,
                     st.duplicate_pushes, st.workers_lost,
                     st.workers_rejoined, st.busy_us, st.workers_left,
                     st.workers_gone};
    memcpy(stats, v, sizeof v);
  }
  return s;
}
/* The committed position into a malloc'd blob (one call to the ps tasks:
 * the buffer has room for the largest position hb.h allows, 64 KiB; asked
 * again only should a later library allow more). */
static hb_status hbw_ps_position(hb_context *ctx, void **out_bytes,
                                 size_t *out_len, int64_t *step) {
  size_t cap = 65536, needed = 0;
  char *buf = (char *)malloc(cap);
  hb_status s;
  *out_bytes = NULL;
  *out_len = 0;
  if (!buf) return HB_ERR_OUT_OF_MEMORY;
  s = hb_ps_position(ctx, buf, cap, &needed, step);
  if (s != HB_OK && needed > cap) {
    char *more = (char *)realloc(buf, needed);
    if (!more) {
      free(buf);
      return HB_ERR_OUT_OF_MEMORY;
    }
    buf = more;
    cap = needed;
    s = hb_ps_position(ctx, buf, cap, &needed, step);
  }
  if (s != HB_OK) {
    free(buf);
    return s;
  }
  *out_bytes = buf;
  *out_len = needed;
  return HB_OK;
}
/* split: 6 int64 -- split, epoch, begin, end, from, replay_end (hb_ps_split
 * in order; split -1: none left; hb_ps_split_try: HB_PS_SPLIT_LATER, none
 * now). */
static void hbw_split_values(const hb_ps_split *sp, void *out) {
  int64_t v[6] = {sp->split, sp->epoch, sp->begin, sp->end, sp->from,
                  sp->replay_end};
  memcpy(out, v, sizeof v);
}
static hb_status hbw_ps_split_next(hb_context *ctx, void *split_out) {
  hb_ps_split sp = HB_PS_SPLIT_INIT;
  hb_status s = hb_ps_split_next(ctx, &sp);
  if (s == HB_OK) hbw_split_values(&sp, split_out);
  return s;
}
static hb_status hbw_ps_split_try(hb_context *ctx, void *split_out) {
  hb_ps_split sp = HB_PS_SPLIT_INIT;
  hb_status s = hb_ps_split_try(ctx, &sp);
  if (s == HB_OK) hbw_split_values(&sp, split_out);
  return s;
}
/* init: cfg->count floats, or NULL (zeros); read during the call only. */
static hb_status hbw_ps_dense_create(hb_context *ctx,
                                     const hb_ps_dense_config *cfg,
                                     const float *init, hb_ps_dense **out) {
  hb_ps_dense_config c;
  if (!cfg) return hb_ps_dense_create(ctx, NULL, out);
  c = *cfg;
  c.init = init;
  return hb_ps_dense_create(ctx, &c, out);
}
%}

/* ---- Embedding collections (EXPERIMENTAL in hb.h) ------------------------ */
/* Flat shapes every language can pass without pointer arrays: features by
 * table handle (int64) and pooling; a batch as a flat KeyedJaggedTensor:
 * values (all features' ids), offsets (num_features * B + 1: feature f's
 * sample b is values[offsets[f*B+b] .. offsets[f*B+b+1])), weights (per id,
 * or NULL); unpooled rows of the pooling-NONE features concatenated in
 * feature order. The language layers check the array sizes before calling
 * (C cannot see them). */
%{
typedef char hbw_pooling_codes_match_hb_h[
    HB_POOLING_NONE == 0 && HB_POOLING_SUM == 1 && HB_POOLING_MEAN == 2 &&
            HB_POOLING_SQRTN == 3 ? 1 : -1];
/* The per-feature pointers of a flat batch (and of the unpooled rows);
 * returns HB_ERR_OUT_OF_MEMORY or HB_OK. */
typedef struct hbw_flat {
  hb_jagged_batch b;
  const int64_t **ids, **offs;
  const float **w;
  float **rows;
} hbw_flat;
static hb_status hbw_flat_init(hbw_flat *f, const hb_collection *coll,
                               int64_t batch, const int64_t *values,
                               const int64_t *offsets, const float *weights,
                               float *rows) {
  size_t n = hb_collection_num_features(coll), i;
  hb_jagged_batch init = HB_JAGGED_BATCH_INIT;
  f->b = init;
  f->ids = (const int64_t **)calloc(n + 1, sizeof *f->ids);
  f->offs = (const int64_t **)calloc(n + 1, sizeof *f->offs);
  f->w = (const float **)calloc(n + 1, sizeof *f->w);
  f->rows = (float **)calloc(n + 1, sizeof *f->rows);
  if (!f->ids || !f->offs || !f->w || !f->rows) return HB_ERR_OUT_OF_MEMORY;
  for (i = 0; i < n; ++i) {
    f->ids[i] = values;
    f->offs[i] = offsets ? offsets + i * batch : NULL;
    f->w[i] = weights;
    if (rows && hb_collection_feature_column(coll, i) < 0 && offsets &&
        batch > 0) {
      f->rows[i] = rows;
      rows += (offsets[(i + 1) * batch] - offsets[i * batch]) *
              hb_collection_feature_dim(coll, i);
    }
  }
  f->b.batch_size = batch;
  f->b.ids = f->ids;
  f->b.offsets = f->offs;
  f->b.weights = weights ? f->w : NULL;
  return HB_OK;
}
static void hbw_flat_free(hbw_flat *f) {
  free(f->ids), free(f->offs), free(f->w), free(f->rows);
}
%}
/* The flat wrappers below replace the pointer-array C calls and structs
 * (SWIG sees the EXPERIMENTAL section for the reader; hb.h's pooling enum
 * comes through as constants). */
%ignore hb_collection_create;
%ignore hb_collection_destroy;
%ignore hb_collection_num_features;
%ignore hb_collection_pooled_width;
%ignore hb_collection_feature_column;
%ignore hb_collection_feature_dim;
%ignore hb_collection_lookup;
/* hb_allreduce_start keeps send and recv until its wait: Python's
   hb.Context.allreduce_start holds the arrays in its request, Java's
   Context.allreduceStart takes direct ByteBuffers only (a Java array is
   pinned or copied for one call only) and holds them, Go's AllreduceStart
   stages the data in C memory (cgo forbids C to keep a Go pointer). */
%apply void *HB_HANDLE { hb_allreduce_request * };
%apply void **HB_HANDLE_OUT { hb_allreduce_request **out };
/* The pipelined lookup keeps the caller's arrays until its wait: Python
   has it through hbpy_collection_lookup_start / _wait (hb_python.i, which
   keeps the flat batch until the wait); Java and Go not yet. */
%ignore hb_collection_lookup_start;
%ignore hb_collection_lookup_wait;
%ignore hb_collection_apply_gradients;
%ignore hb_collection_apply_gradients_dense;
%ignore hb_collection_dense;
%ignore hb_collection_get_stats;
%ignore hb_collection_feature;
%ignore hb_jagged_batch;
%ignore hb_collection_stats;
%apply void *HB_HANDLE { hb_collection *, const hb_collection * };
%apply void **HB_HANDLE_OUT { hb_collection **out };
%apply const int64_t *HB_ARRAY_IN { const int64_t *tables,
                                    const int64_t *pooling,
                                    const int64_t *values,
                                    const int64_t *offsets };
%apply const float *HB_ARRAY_IN { const float *grad_out,
                                  const float *grad_unpooled,
                                  const float *dense_send };
%apply void *HB_BUFFER_OUT { void *unpooled, void *stats, void *dense_recv };
%rename(hb_collection_create) hbw_collection_create;
%rename(hb_collection_destroy) hbw_collection_destroy;
%rename(hb_collection_num_features) hbw_collection_num_features;
%rename(hb_collection_pooled_width) hbw_collection_pooled_width;
%rename(hb_collection_feature_column) hbw_collection_feature_column;
%rename(hb_collection_feature_dim) hbw_collection_feature_dim;
%rename(hb_collection_lookup) hbw_collection_lookup;
%rename(hb_collection_apply_gradients) hbw_collection_apply_gradients;
%rename(hb_collection_apply_gradients_dense) hbw_collection_apply_gradients_dense;
%rename(hb_collection_get_stats) hbw_collection_get_stats;
%inline %{
static hb_status hbw_collection_create(hb_context *ctx, const int64_t *tables,
                                       const int64_t *pooling, size_t n,
                                       hb_collection **out) {
  hb_collection_feature *fs =
      (hb_collection_feature *)calloc(n ? n : 1, sizeof *fs);
  hb_status s;
  size_t i;
  if (!fs) return HB_ERR_OUT_OF_MEMORY;
  for (i = 0; i < n; ++i) {
    hb_collection_feature init = HB_COLLECTION_FEATURE_INIT;
    fs[i] = init;
    fs[i].table = (hb_embedding *)(intptr_t)tables[i];
    fs[i].pooling = (int32_t)pooling[i];
  }
  s = hb_collection_create(ctx, fs, n, out);
  free(fs);
  return s;
}
static void hbw_collection_destroy(hb_collection *coll) {
  hb_collection_destroy(coll);
}
static size_t hbw_collection_num_features(const hb_collection *coll) {
  return hb_collection_num_features(coll);
}
static int64_t hbw_collection_pooled_width(const hb_collection *coll) {
  return hb_collection_pooled_width(coll);
}
static int64_t hbw_collection_feature_column(const hb_collection *coll,
                                             size_t feature) {
  return hb_collection_feature_column(coll, feature);
}
static int64_t hbw_collection_feature_dim(const hb_collection *coll,
                                          size_t feature) {
  return hb_collection_feature_dim(coll, feature);
}

static hb_status hbw_collection_lookup(hb_collection *coll, int64_t batch,
                                       const int64_t *values,
                                       const int64_t *offsets,
                                       const float *weights, void *out,
                                       void *unpooled) {
  hbw_flat f;
  hb_status s = hbw_flat_init(&f, coll, batch, values, offsets, weights,
                              (float *)unpooled);
  if (s == HB_OK) s = hb_collection_lookup(coll, &f.b, (float *)out, f.rows);
  hbw_flat_free(&f);
  return s;
}
/* hb_collection_apply_gradients_dense: dense_count float32 of dense_send
 * summed over the ranks into dense_recv (may be dense_send's memory). */
static hb_status hbw_collection_apply_gradients_dense(
    hb_collection *coll, int64_t batch, const int64_t *values,
    const int64_t *offsets, const float *weights, const float *grad_out,
    const float *grad_unpooled, const float *dense_send, void *dense_recv,
    size_t dense_count) {
  hbw_flat f;
  hb_collection_dense d = HB_COLLECTION_DENSE_INIT;
  hb_status s = hbw_flat_init(&f, coll, batch, values, offsets, weights,
                              (float *)grad_unpooled);
  d.send = dense_send;
  d.recv = (float *)dense_recv;
  d.count = dense_count;
  if (s == HB_OK)
    s = hb_collection_apply_gradients_dense(
        coll, &f.b, grad_out, (const float *const *)f.rows,
        dense_send || dense_recv || dense_count ? &d : NULL);
  hbw_flat_free(&f);
  return s;
}
static hb_status hbw_collection_apply_gradients(
    hb_collection *coll, int64_t batch, const int64_t *values,
    const int64_t *offsets, const float *weights, const float *grad_out,
    const float *grad_unpooled) {
  return hbw_collection_apply_gradients_dense(coll, batch, values, offsets,
                                              weights, grad_out, grad_unpooled,
                                              NULL, NULL, 0);
}
/* stats: 10 uint64 (hb_collection_stats after struct_size, in order). */
static hb_status hbw_collection_get_stats(const hb_collection *coll,
                                          void *stats) {
  hb_collection_stats st = HB_COLLECTION_STATS_INIT;
  hb_status s = hb_collection_get_stats(coll, &st);
  if (s == HB_OK) memcpy(stats, &st.lookups, 10 * sizeof(uint64_t));
  return s;
}
%}

/* ---- Job checkpoints (EXPERIMENTAL in hb.h) ------------------------------ */
/* Handles as elsewhere; a registered buffer is writable memory (the
 * language layers keep the array alive while the handle lives). Caller-
 * sized strings and the stats struct come through flat wrappers. */
%apply void *HB_HANDLE { hb_checkpoint *, const hb_checkpoint * };
%apply void **HB_HANDLE_OUT { hb_checkpoint **out };
%apply void *HB_BUFFER_OUT { void *data, void *stats_out };
%apply int64_t *OUTPUT { int64_t *step };
%typemap(memberin) const char *dir, const char *job_id {
  free((char *)$1);
  $1 = $input ? hbw_strdup($input) : NULL;
}
%extend hb_checkpoint_config {
  hb_checkpoint_config() {
    hb_checkpoint_config init = HB_CHECKPOINT_CONFIG_INIT;
    hb_checkpoint_config *c = (hb_checkpoint_config *)malloc(sizeof *c);
    if (c) *c = init;
    return c;
  }
  ~hb_checkpoint_config() {
    free((char *)$self->dir);
    free((char *)$self->job_id);
    free($self);
  }
}
%ignore hb_checkpoint_stats;
%ignore hb_checkpoint_get_stats;
%ignore hb_checkpoint_get_meta;
%ignore hb_checkpoint_latest;
%rename(hb_checkpoint_get_meta) hbw_checkpoint_get_meta;
%rename(hb_checkpoint_latest) hbw_checkpoint_latest;
%{
/* A caller-sized string call, asked twice when 256 bytes are too few. */
#define HBW_STRING_CALL(CALL_WITH_BUF_CAP_NEEDED)                         \
  do {                                                                  \
    char small[256];                                                    \
    char *buf = small;                                                  \
    size_t cap = sizeof small, needed = 0;                              \
    hb_status s = CALL_WITH_BUF_CAP_NEEDED;                             \
    *out_str = NULL;                                                    \
    if (s != HB_OK && needed > sizeof small) {                          \
      buf = (char *)malloc(needed);                                     \
      if (!buf) return HB_ERR_OUT_OF_MEMORY;                            \
      cap = needed;                                                     \
      s = CALL_WITH_BUF_CAP_NEEDED;                                     \
      if (s == HB_OK) *out_str = buf;                                   \
      else free(buf);                                                   \
    } else if (s == HB_OK) {                                            \
      *out_str = hbw_strdup(small);                                     \
    }                                                                   \
    return s;                                                           \
  } while (0)
%}
%inline %{
static hb_status hbw_checkpoint_get_meta(const hb_checkpoint *c,
                                         const char *key, char **out_str) {
  HBW_STRING_CALL(hb_checkpoint_get_meta(c, key, buf, cap, &needed));
}
/* The newest complete checkpoint of dir: its path (empty when none). */
static hb_status hbw_checkpoint_latest(const char *dir, char **out_str,
                                       int64_t *step) {
  HBW_STRING_CALL(hb_checkpoint_latest(dir, buf, cap, &needed, step));
}
/* stats_out: 13 doubles -- saves, last_step, committed_step, pending,
 * skipped_damaged, restored_step, restored_world, unmapped_buffers,
 * state_bytes, file_bytes, blocked_seconds, write_seconds, failed_saves. */
static hb_status hbw_checkpoint_stats(const hb_checkpoint *c,
                                      void *stats_out) {
  hb_checkpoint_stats st = HB_CHECKPOINT_STATS_INIT;
  double *o = (double *)stats_out;
  hb_status s = hb_checkpoint_get_stats(c, &st);
  if (s != HB_OK) return s;
  o[0] = (double)st.saves, o[1] = (double)st.last_step;
  o[2] = (double)st.committed_step, o[3] = st.pending;
  o[4] = st.skipped_damaged, o[5] = (double)st.restored_step;
  o[6] = st.restored_world, o[7] = st.unmapped_buffers;
  o[8] = (double)st.state_bytes, o[9] = (double)st.file_bytes;
  o[10] = st.blocked_seconds, o[11] = st.write_seconds;
  o[12] = (double)st.failed_saves;
  return HB_OK;
}
/* The checkpoint the last restore used ("" when none). */
static hb_status hbw_checkpoint_restored_path(const hb_checkpoint *c,
                                              char **out_str) {
  hb_checkpoint_stats st = HB_CHECKPOINT_STATS_INIT;
  hb_status s = hb_checkpoint_get_stats(c, &st);
  *out_str = NULL;
  if (s == HB_OK) *out_str = hbw_strdup(st.restored_path);
  return s;
}
%}

/* ---- Evaluator (EXPERIMENTAL in hb.h) ----------------------------------- */
/* A handle; the config's strings as the checkpoint config's; the metric
 * values and the stats struct through flat wrappers. */
%apply void *HB_HANDLE { hb_evaluator *, const hb_evaluator * };
%apply void **HB_HANDLE_OUT { hb_evaluator **out };
%apply void *HB_BUFFER_OUT { void *values_out };
%typemap(memberin) const char *log_path {
  free((char *)$1);
  $1 = $input ? hbw_strdup($input) : NULL;
}
%extend hb_evaluator_config {
  hb_evaluator_config() {
    hb_evaluator_config init = HB_EVALUATOR_CONFIG_INIT;
    hb_evaluator_config *c = (hb_evaluator_config *)malloc(sizeof *c);
    if (c) *c = init;
    return c;
  }
  ~hb_evaluator_config() {
    free((char *)$self->dir);
    free((char *)$self->job_id);
    free((char *)$self->log_path);
    free($self);
  }
}
%ignore hb_evaluator_stats;
%ignore hb_evaluator_get_stats;
%ignore hb_evaluator_report;
%inline %{
/* values_out: one double per metric added (may be NULL). */
static hb_status hbw_evaluator_report(hb_evaluator *ev, void *values_out) {
  return hb_evaluator_report(ev, (double *)values_out);
}
/* stats_out: 11 doubles -- evaluated, reported, skipped, last_step,
 * finished, split_epoch, split_epochs, splits_done, splits_open,
 * split_samples_done, split_samples_total. */
static hb_status hbw_evaluator_stats(const hb_evaluator *ev,
                                     void *stats_out) {
  hb_evaluator_stats st = HB_EVALUATOR_STATS_INIT;
  double *o = (double *)stats_out;
  hb_status s = hb_evaluator_get_stats(ev, &st);
  if (s != HB_OK) return s;
  o[0] = (double)st.evaluated, o[1] = (double)st.reported;
  o[2] = (double)st.skipped, o[3] = (double)st.last_step;
  o[4] = st.finished, o[5] = (double)st.split_epoch;
  o[6] = (double)st.split_epochs, o[7] = (double)st.splits_done;
  o[8] = (double)st.splits_open, o[9] = (double)st.split_samples_done;
  o[10] = (double)st.split_samples_total;
  return HB_OK;
}
/* split_out: 6 int64 per open split (hbw_ps_split_next's order), the
 * first cap of the stats' splits_open. */
static hb_status hbw_evaluator_open_splits(const hb_evaluator *ev,
                                           void *split_out, size_t cap) {
  hb_ps_split one = HB_PS_SPLIT_INIT;
  size_t i, n = 0, *count = &n;
  hb_status s;
  hb_ps_split *all = (hb_ps_split *)calloc(cap ? cap : 1, sizeof one);
  if (!all) return HB_ERR_OUT_OF_MEMORY;
  for (i = 0; i < cap; ++i) all[i] = one;
  s = hb_evaluator_open_splits(ev, all, cap, count);
  for (i = 0; s == HB_OK && i < cap && i < *count; ++i)
    hbw_split_values(&all[i], (int64_t *)split_out + 6 * i);
  free(all);
  return s;
}
%}

#define HB_API
/* ---- Table lifecycle (EXPERIMENTAL in hb.h) ------------------------------ */
/* hb_embedding_lifecycle is a plain options struct (HB_EMBEDDING_LIFECYCLE_
 * INIT defaults); a config takes a copy of one through use_lifecycle() and
 * frees it with itself, so no language object has to outlive the config.
 * The eviction callback is C only. */
%ignore hb_embedding_config::lifecycle;
%ignore hb_embedding_lifecycle::on_evict;
%ignore hb_embedding_lifecycle::user_data;
%extend hb_embedding_lifecycle {
  hb_embedding_lifecycle() {
    hb_embedding_lifecycle init = HB_EMBEDDING_LIFECYCLE_INIT;
    hb_embedding_lifecycle *l =
        (hb_embedding_lifecycle *)malloc(sizeof *l);
    if (l) *l = init;
    return l;
  }
  ~hb_embedding_lifecycle() { free($self); }
}
/* Stats as 12 int64 (Python, Java and Go read them alike): step, rows,
 * pending, admitted, dropped, evicted_ttl, evicted_l2, evicted_capacity,
 * boundaries, selection_rounds, boundary time in microseconds,
 * memory_bytes. */
%ignore hb_embedding_lifecycle_stats;
%ignore hb_embedding_lifecycle_get_stats;
%rename(hb_embedding_lifecycle_get_stats) hbw_embedding_lifecycle_get_stats;
%inline %{
static hb_status hbw_embedding_lifecycle_get_stats(const hb_embedding *emb,
                                                   void *stats) {
  hb_embedding_lifecycle_stats st = HB_EMBEDDING_LIFECYCLE_STATS_INIT;
  hb_status s = hb_embedding_lifecycle_get_stats(emb, &st);
  if (s == HB_OK) {
    int64_t v[12] = {(int64_t)st.step, st.rows, st.pending,
                     (int64_t)st.admitted, (int64_t)st.dropped,
                     (int64_t)st.evicted_ttl, (int64_t)st.evicted_l2,
                     (int64_t)st.evicted_capacity, (int64_t)st.boundaries,
                     (int64_t)st.selection_rounds,
                     (int64_t)(st.boundary_seconds * 1e6),
                     (int64_t)st.memory_bytes};
    memcpy(stats, v, sizeof v);
  }
  return s;
}
%}
%extend hb_embedding_config {
  /* Copies l into the config (NULL: no lifecycle). */
  void use_lifecycle(const hb_embedding_lifecycle *l) {
    hb_embedding_lifecycle *copy = NULL;
    if (l) {
      copy = (hb_embedding_lifecycle *)malloc(sizeof *copy);
      if (copy) *copy = *l;
    }
    free((void *)$self->lifecycle);
    $self->lifecycle = copy;
  }
}

%include "hb.h"
