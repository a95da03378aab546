// The hb_collection_* entry points (EXPERIMENTAL section of hb.h).
#include "embedding/collection.h"  // first: it turns on HB_EXPERIMENTAL
#include "embedding/device_collection.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "abi/error.h"
#include "abi/struct_out.h"
#include "comm/context_exchange.h"
#include "comm/progress.h"
#include "context/context.h"
#include "tables/collection_handle.h"
#include "tables/handle.h"

namespace {

hb::emb::CollectionBase &coll_ref(hb_collection *c, const char *fn) {
  if (!c) hb::fail(HB_ERR_INVALID_ARGUMENT, "%s: collection is NULL", fn);
  c->ctx->check();
  return *c->coll;
}

// A bad hb_jagged_batch is not thrown here: the collection reports it in
// the call's header round, so every rank fails at once naming this rank
// instead of waiting for it until timeout_ms.
hb::emb::JaggedBatch jagged(const hb_jagged_batch *in, const char *fn) {
  hb::emb::JaggedBatch j;
  if (!in) {
    j.error = hb::format("%s: batch is NULL", fn);
    return j;
  }
  if (in->struct_size < offsetof(hb_jagged_batch, weights)) {
    j.error = hb::format("%s: batch->struct_size %zu is too small", fn,
                         in->struct_size);
    return j;
  }
  hb_jagged_batch b = HB_JAGGED_BATCH_INIT;
  std::memcpy(&b, in, std::min(in->struct_size, sizeof b));
  j.batch = b.batch_size;
  j.ids = b.ids;
  j.offsets = b.offsets;
  j.lengths = b.lengths;
  j.weights = b.weights;
  return j;
}

// A bad hb_collection_dense is reported in the step's round too (its
// count is then 0: a peer that passes one fails the sizes' check).
hb::emb::DenseSum dense_sum(const hb_collection_dense *in, const char *fn) {
  hb::emb::DenseSum d;
  if (in && in->struct_size <
                offsetof(hb_collection_dense, count) + sizeof in->count) {
    d.error = hb::format("%s: dense->struct_size %zu is too small", fn,
                         in->struct_size);
    return d;
  }
  hb_collection_dense x = HB_COLLECTION_DENSE_INIT;
  if (in) std::memcpy(&x, in, std::min(in->struct_size, sizeof x));
  d.send = x.send;
  d.recv = x.recv;
  d.count = x.count;
  return d;
}

}  // namespace

extern "C" {

hb_status hb_collection_create(hb_context *ctx,
                               const hb_collection_feature *features,
                               size_t num_features, hb_collection **out) {
  return hb::guard([&] {
    const char *fn = "hb_collection_create";
    HB_CHECK_ARG(out, "%s: out is NULL", fn);
    *out = nullptr;
    hb_context &c = hb::ctx_ref(ctx);
    c.check();
    HB_CHECK_ARG(features || num_features == 0, "%s: features is NULL", fn);
    std::vector<hb::emb::Feature> fs(num_features);
    bool device = false;  // GPU tables: a device collection
    std::vector<hb_embedding *> tables;
    size_t on_ps = 0;  // tables placed on the ps tasks
    for (size_t f = 0; f < num_features; ++f) {
      hb_collection_feature in = HB_COLLECTION_FEATURE_INIT;
      HB_CHECK_ARG(
          features[f].struct_size >=
              offsetof(hb_collection_feature, pooling) + sizeof(int32_t),
          "%s: features[%zu].struct_size %zu is too small", fn, f,
          features[f].struct_size);
      std::memcpy(&in, &features[f],
                  std::min(features[f].struct_size, sizeof in));
      if (in.name) fs[f].name = in.name;
      fs[f].pooling = in.pooling;
      hb_embedding *e = in.table;
      HB_CHECK_ARG(e, "%s: features[%zu].table is NULL", fn, f);
      HB_CHECK_ARG(e->table, "%s: features[%zu]: a serving table is read-only",
                   fn, f);
      HB_CHECK_ARG(e->ctx == ctx,
                   "%s: features[%zu]: table '%s' belongs to another context",
                   fn, f, e->table->spec().name.c_str());
      if (std::find(tables.begin(), tables.end(), e) == tables.end())
        tables.push_back(e);
      fs[f].table = e->table.get();
      fs[f].device = e->gpu.get();
      device = device || e->gpu;
      on_ps += e->ps ? 1 : 0;
    }
    // Tables on the ps tasks: the collection's local half runs in a world
    // of one (this worker) and their owner halves go to the ps tasks.
    if (on_ps && on_ps != num_features)
      hb::fail(HB_ERR_UNSUPPORTED,
               "%s: %zu of the %zu features read tables on the ps tasks: a "
               "collection's tables are all on the ps tasks or none",
               fn, on_ps, num_features);
    std::unique_ptr<hb_collection> h(new hb_collection);
    h->ctx = ctx;
    h->tables = std::move(tables);
    // Host tables in a world of several: the rounds run over the context's
    // progress channel, so a started lookup's overlap the caller's compute
    // (option cpu_async_exchange; comm/progress.h).
    const bool async = !on_ps && !device && c.cluster.world_size > 1 &&
                       c.options.get_int("cpu_async_exchange") != 0;
    auto x = on_ps   ? hb::comm::make_local_exchange()
             : async ? hb::comm::make_progress_exchange(ctx)
                     : hb::comm::make_context_exchange(ctx);
    if (device)
      h->coll.reset(new hb::emb::DeviceCollection(std::move(fs), std::move(x)));
    else
      h->coll.reset(new hb::emb::Collection(std::move(fs), std::move(x)));
    *out = h.release();
  });
}

void hb_collection_destroy(hb_collection *coll) { delete coll; }

size_t hb_collection_num_features(const hb_collection *coll) {
  return coll ? coll->coll->num_features() : 0;
}

int64_t hb_collection_pooled_width(const hb_collection *coll) {
  return coll ? coll->coll->pooled_width() : 0;
}

int64_t hb_collection_feature_column(const hb_collection *coll,
                                     size_t feature) {
  if (!coll || feature >= coll->coll->num_features()) return -1;
  return coll->coll->column(feature);
}

int64_t hb_collection_feature_dim(const hb_collection *coll, size_t feature) {
  if (!coll || feature >= coll->coll->num_features()) return 0;
  return coll->coll->dim(feature);
}

hb_status hb_collection_lookup(hb_collection *coll,
                               const hb_jagged_batch *batch, float *out,
                               float *const *unpooled) {
  return hb::guard([&] {
    const char *fn = "hb_collection_lookup";
    hb::emb::CollectionBase &c = coll_ref(coll, fn);
    c.lookup(jagged(batch, fn), out, unpooled);
  });
}

hb_status hb_collection_apply_gradients(hb_collection *coll,
                                        const hb_jagged_batch *batch,
                                        const float *grad_out,
                                        const float *const *grad_unpooled) {
  return hb::guard([&] {
    const char *fn = "hb_collection_apply_gradients";
    hb::emb::CollectionBase &c = coll_ref(coll, fn);
    c.apply_gradients(jagged(batch, fn), grad_out, grad_unpooled);
  });
}

hb_status hb_collection_apply_gradients_dense(
    hb_collection *coll, const hb_jagged_batch *batch, const float *grad_out,
    const float *const *grad_unpooled, const hb_collection_dense *dense) {
  return hb::guard([&] {
    const char *fn = "hb_collection_apply_gradients_dense";
    hb::emb::CollectionBase &c = coll_ref(coll, fn);
    const hb::emb::DenseSum d = dense_sum(dense, fn);
    c.apply_gradients(jagged(batch, fn), grad_out, grad_unpooled, &d);
  });
}

hb_status hb_collection_lookup_start(hb_collection *coll,
                                     const hb_jagged_batch *batch, float *out,
                                     float *const *unpooled) {
  return hb::guard([&] {
    const char *fn = "hb_collection_lookup_start";
    hb::emb::CollectionBase &c = coll_ref(coll, fn);
    c.lookup_start(jagged(batch, fn), out, unpooled);
  });
}

hb_status hb_collection_lookup_wait(hb_collection *coll) {
  return hb::guard(
      [&] { coll_ref(coll, "hb_collection_lookup_wait").lookup_wait(); });
}

hb_status hb_collection_get_stats(const hb_collection *coll,
                                  hb_collection_stats *out) {
  return hb::guard([&] {
    HB_CHECK_ARG(coll && out, "hb_collection_get_stats: NULL argument");
    HB_CHECK_ARG(out->struct_size >= sizeof(size_t),
                 "hb_collection_get_stats: struct_size %zu is too small",
                 out->struct_size);
    coll->coll->settle();  // a started lookup's rounds count when done
    const hb::emb::CollectionStats &s = coll->coll->stats();
    hb_collection_stats r = HB_COLLECTION_STATS_INIT;
    r.lookups = s.lookups, r.updates = s.updates,
    r.reused_plans = s.reused_plans, r.rounds = s.rounds, r.ids = s.ids,
    r.unique_ids = s.unique_ids, r.owner_unique = s.owner_unique,
    r.wire_bytes_sent = s.wire_bytes_sent,
    r.wire_bytes_recv = s.wire_bytes_recv,
    r.dedup_bound_bytes = s.dedup_bound_bytes;
    hb::copy_struct_out(r, out);
  });
}

hb_status hb_collection_reset_stats(hb_collection *coll) {
  return hb::guard([&] {
    HB_CHECK_ARG(coll, "hb_collection_reset_stats: collection is NULL");
    coll->coll->settle();
    coll->coll->reset_stats();
  });
}

}  // extern "C"
