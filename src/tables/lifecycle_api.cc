// hb_embedding_lifecycle_* entry points (hb.h, EXPERIMENTAL).
#define HB_EXPERIMENTAL 1
#include <algorithm>
#include <cstring>

#include "abi/error.h"
#include "tables/handle.h"

extern "C" {

hb_status hb_embedding_lifecycle_get_stats(const hb_embedding *emb,
                                           hb_embedding_lifecycle_stats *out) {
  return hb::guard([&] {
    HB_CHECK_ARG(emb, "hb_embedding_lifecycle_get_stats: embedding is NULL");
    HB_CHECK_ARG(out && out->struct_size >= sizeof(size_t),
                 "hb_embedding_lifecycle_get_stats: out is NULL or its "
                 "struct_size is 0");
    HB_CHECK_ARG(emb->table && emb->table->life(),
                 "hb_embedding_lifecycle_get_stats: table '%s' has no "
                 "lifecycle",
                 emb->table ? emb->table->spec().name.c_str()
                            : emb->serving->name().c_str());
    const hb::emb::Table &t = *emb->table;
    const hb::lifecycle::Lifecycle &l = *t.life();
    const hb::lifecycle::Stats &s = l.stats();
    hb_embedding_lifecycle_stats r = HB_EMBEDDING_LIFECYCLE_STATS_INIT;
    r.step = t.row_meta()->step();
    r.rows = t.shard().rows();
    r.pending = l.admission().pending();
    r.admitted = s.admitted;
    r.dropped = s.dropped;
    r.evicted_ttl = s.evicted_ttl;
    r.evicted_l2 = s.evicted_l2;
    r.evicted_capacity = s.evicted_capacity;
    r.boundaries = s.boundaries;
    r.selection_rounds = s.selection_rounds;
    r.boundary_seconds = s.boundary_seconds;
    r.memory_bytes = t.shard().memory_bytes() + t.row_meta()->memory_bytes() +
                     l.admission().memory_bytes();
    size_t n = std::min(out->struct_size, sizeof r);
    r.struct_size = out->struct_size;
    std::memcpy(out, &r, n);
  });
}

}  // extern "C"
