// The hb_ps_dense handle: a dense buffer kept on the ps tasks as a static
// table (hb_ps_dense_create), held by job checkpoints as the tables are
// (hb_checkpoint_add_ps_dense, src/recovery).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "abi/error.h"
#include "context/context.h"
#include "ps/ps_table.h"
#include "tables/handle.h"

struct hb_ps_dense {
  int64_t count = 0;
  std::vector<int64_t> ids;  // 0 .. rows - 1
  std::vector<float> buf;    // rows x dim (the last row padded)
  // Its table on the ps tasks (emb->ps), a table handle so that job
  // checkpoints hold it as they hold the tables (hb_checkpoint_add_ps_dense).
  std::unique_ptr<hb_embedding> emb;
  hb::ps::PsTable &table() { return *emb->ps; }
  const std::string &name() const { return emb->name; }
};

namespace hb {
namespace emb {

// The buffer behind an entry point's argument (HB_ERR_INVALID_ARGUMENT
// naming fn when NULL); fails as its context has failed.
inline hb_ps_dense &dense_ref(hb_ps_dense *d, const char *fn) {
  if (!d) fail(HB_ERR_INVALID_ARGUMENT, "%s: buffer is NULL", fn);
  d->emb->ctx->check();
  return *d;
}

}  // namespace emb
}  // namespace hb
