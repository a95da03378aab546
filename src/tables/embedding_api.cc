// The hb_embedding_* entry points: a handle is either a sharded table on a
// context or a read-only serving table opened from an export file.
#include <memory>

#include "abi/error.h"
#include "comm/context_exchange.h"
#include "context/context.h"
#include "embedding/checkpoint.h"
#include "ps/client.h"
#include "ps/ps_table.h"
#include "rendezvous/client.h"
#include "rendezvous/server.h"
#include "tables/handle.h"

using hb::emb::sharded;

extern "C" {

hb_status hb_embedding_create(hb_context *ctx, const hb_embedding_config *cfg,
                              hb_embedding **out) {
  return hb::guard([&] {
    HB_CHECK_ARG(out, "hb_embedding_create: out is NULL");
    *out = nullptr;
    hb_context &c = hb::ctx_ref(ctx);
    c.check();
    hb::emb::Spec spec = hb::emb::spec_from_config(cfg);
    std::unique_ptr<hb_embedding> e(new hb_embedding);
    e->ctx = ctx;
    auto reserve = [&] {
      if (!c.table_names->reserve(spec.name))
        hb::fail(HB_ERR_INVALID_ARGUMENT,
                 "hb_embedding_create('%s'): this context already has a "
                 "table named '%s' (names are unique per context)",
                 spec.name.c_str(), spec.name.c_str());
      e->names = c.table_names;
      e->name = spec.name;
    };
    if (spec.placement == 1) {
      auto *t = new hb::ps::PsTable(hb::ps::client_of(c, "hb_embedding_create"),
                                    spec, reserve);
      e->table.reset(t);
      e->ps = t;
      *out = e.release();
      return;
    }
    e->table.reset(new hb::emb::Table(
        spec, hb::comm::make_context_exchange(ctx), reserve));
    if (spec.device >= 0)
      e->gpu.reset(new hb::emb::DeviceTable(*e->table, [&] {
        return hb::emb::make_gpu_ops(c, spec.device, spec.wire_dtype,
                                     "hb_embedding_create");
      }));
    *out = e.release();
  });
}

void hb_embedding_destroy(hb_embedding *emb) { delete emb; }

hb_status hb_embedding_lookup(hb_embedding *emb, const int64_t *ids, size_t n,
                              void *out) {
  return hb::guard(
      [&] { hb::emb::lookup(emb, ids, n, out, "hb_embedding_lookup"); });
}

hb_status hb_embedding_apply_gradients(hb_embedding *emb, const int64_t *ids,
                                       size_t n, const void *grads) {
  return hb::guard([&] {
    hb::emb::Table &t = sharded(emb, "hb_embedding_apply_gradients");
    if (emb->gpu)
      emb->gpu->apply_gradients(ids, n, static_cast<const float *>(grads));
    else
      t.apply_gradients(ids, n, static_cast<const float *>(grads));
  });
}

hb_status hb_embedding_save(hb_embedding *emb, const char *dir) {
  return hb::guard([&] {
    hb::emb::Table &t = sharded(emb, "hb_embedding_save");
    emb->ctx->fire(HB_EVENT_BEFORE_SAVE, dir);
    if (emb->gpu) emb->gpu->download();  // the host shard is the snapshot
    if (emb->ps)
      emb->ps->save(dir);
    else
      hb::emb::save_checkpoint(t, dir);
    emb->ctx->fire(HB_EVENT_AFTER_SAVE, dir);
  });
}

hb_status hb_embedding_load(hb_embedding *emb, const char *dir) {
  return hb::guard([&] {
    hb::emb::Table &t = sharded(emb, "hb_embedding_load");
    emb->ctx->fire(HB_EVENT_BEFORE_LOAD, dir);
    if (emb->ps) {
      emb->ps->load(dir);
    } else {
      hb::emb::load_checkpoint(t, dir);
      emb->exports = hb::serving::ExportHistory();  // its bases are gone
    }
    if (emb->gpu) emb->gpu->upload();
    emb->ctx->fire(HB_EVENT_AFTER_LOAD, dir);
  });
}

hb_status hb_embedding_export(hb_embedding *emb, const char *path) {
  return hb::guard([&] {
    hb::emb::Table &t = sharded(emb, "hb_embedding_export");
    if (emb->gpu) emb->gpu->download();
    if (emb->ps)
      emb->ps->export_to(path);
    else
      hb::serving::export_table(t, path);
  });
}

hb_status hb_embedding_open(const char *path, hb_embedding **out) {
  return hb::guard([&] {
    HB_CHECK_ARG(out, "hb_embedding_open: out is NULL");
    *out = nullptr;
    std::unique_ptr<hb_embedding> e(new hb_embedding);
    e->serving.reset(new hb::serving::ServingTable(path));
    *out = e.release();
  });
}

int64_t hb_embedding_dim(const hb_embedding *emb) {
  if (!emb) return 0;
  return emb->serving ? emb->serving->dim() : emb->table->spec().dim;
}

int64_t hb_embedding_local_rows(const hb_embedding *emb) {
  if (!emb) return 0;
  if (emb->serving) return emb->serving->rows();
  return emb->ps ? 0 : emb->table->shard().rows();  // ps: rows on the ps
}

uint64_t hb_embedding_misses(const hb_embedding *emb) {
  return emb && emb->serving ? emb->serving->misses() : 0;
}

}  // extern "C"
