// The hb_embedding handle: a sharded table on a context, or a read-only
// serving table opened from an export file. Internal (benchmarks read the
// table's Stats through it).
#pragma once

#include <memory>
#include <string>

#include "abi/error.h"
#include "context/context.h"
#include "embedding/device_table.h"
#include "embedding/table.h"
#include "hb.h"
#include "serving/export_table.h"
#include "serving/serving_table.h"

namespace hb {
namespace ps {
class PsTable;
}  // namespace ps
}  // namespace hb

struct hb_embedding {
  ~hb_embedding() {
    if (names) names->release(name);
  }
  hb_context *ctx = nullptr;
  // The name this table holds in its context's registry (sharded tables).
  std::shared_ptr<hb::TableNames> names;
  std::string name;
  std::unique_ptr<hb::emb::Table> table;  // sharded (a GPU table's host side)
  // placement HB_PLACEMENT_PS: `table` is this ps::PsTable (rows on the ps
  // tasks, src/ps).
  hb::ps::PsTable *ps = nullptr;
  // device >= 0: the rows on the GPU; declared after `table`, which it uses,
  // so it is destroyed first.
  std::unique_ptr<hb::emb::DeviceTable> gpu;
  // Versioned exports of a sharded table (serving/export_table.h).
  hb::serving::ExportHistory exports;
  std::unique_ptr<hb::serving::ServingTable> serving;  // opened from a file
};

namespace hb {
namespace emb {

// The handle behind an entry point's argument (HB_ERR_INVALID_ARGUMENT
// naming fn when NULL).
inline hb_embedding &ref(hb_embedding *emb, const char *fn) {
  if (!emb) fail(HB_ERR_INVALID_ARGUMENT, "%s: embedding is NULL", fn);
  return *emb;
}

// The sharded table of a handle; a serving table is refused.
inline Table &sharded(hb_embedding *emb, const char *fn) {
  hb_embedding &e = ref(emb, fn);
  if (!e.table)
    fail(HB_ERR_INVALID_ARGUMENT, "%s('%s'): a serving table is read-only", fn,
         e.serving->name().c_str());
  e.ctx->check();
  return *e.table;
}

// A lookup on either kind of handle; returns the served version (0 for a
// sharded table).
inline int64_t lookup(hb_embedding *emb, const int64_t *ids, size_t n,
                      void *out, const char *fn) {
  hb_embedding &e = ref(emb, fn);
  if (e.serving) return e.serving->lookup(ids, n, static_cast<float *>(out));
  Table &t = sharded(emb, fn);
  if (e.gpu)
    e.gpu->lookup(ids, n, static_cast<float *>(out));
  else
    t.lookup(ids, n, static_cast<float *>(out));
  return 0;
}

}  // namespace emb
}  // namespace hb
