// The versioned-export and serving-update entry points (EXPERIMENTAL
// section of hb.h).
#ifndef HB_EXPERIMENTAL
#define HB_EXPERIMENTAL 1
#endif

#include "abi/error.h"
#include "context/context.h"
#include "tables/handle.h"

namespace {

hb::serving::ServingTable &serving(hb_embedding *emb, const char *fn) {
  hb_embedding &e = hb::emb::ref(emb, fn);
  if (!e.serving)
    hb::fail(HB_ERR_INVALID_ARGUMENT,
             "%s('%s'): not a serving table (open one with "
             "hb_embedding_open)",
             fn, e.name.c_str());
  return *e.serving;
}

}  // namespace

extern "C" {

hb_status hb_embedding_export_version(hb_embedding *emb, const char *path,
                                      int64_t version, int64_t base_version) {
  return hb::guard([&] {
    hb::emb::Table &t = hb::emb::sharded(emb, "hb_embedding_export_version");
    if (emb->ps)  // the ps tasks keep no change stamps
      hb::fail(HB_ERR_UNSUPPORTED,
               "hb_embedding_export_version('%s'): versioned exports of a "
               "table on the ps tasks are not supported; use "
               "hb_embedding_export",
               t.spec().name.c_str());
    if (emb->gpu && base_version > 0)  // the device path keeps no stamps
      hb::fail(HB_ERR_UNSUPPORTED,
               "hb_embedding_export_version('%s'): deltas of a GPU table are "
               "not supported; export full versions (base 0)",
               t.spec().name.c_str());
    if (emb->gpu) emb->gpu->download();
    const int64_t keep = emb->ctx->options.get_int("delta_keep_versions");
    hb::serving::export_version(t, emb->exports, path, version, base_version,
                                keep);
  });
}

hb_status hb_embedding_update(hb_embedding *emb, const char *path) {
  return hb::guard([&] { serving(emb, "hb_embedding_update").update(path); });
}

hb_status hb_embedding_lookup_version(hb_embedding *emb, const int64_t *ids,
                                      size_t n, void *out,
                                      int64_t *out_version) {
  return hb::guard([&] {
    int64_t v =
        hb::emb::lookup(emb, ids, n, out, "hb_embedding_lookup_version");
    if (out_version) *out_version = v;
  });
}

int64_t hb_embedding_version(const hb_embedding *emb) {
  return emb && emb->serving ? emb->serving->version() : 0;
}

}  // extern "C"
