// The hb_embedding handle: a sharded table on a context, or a read-only
// serving table opened from an export file. Internal (benchmarks read the
// table's Stats through it).
#pragma once

#include <memory>

#include "embedding/serving.h"
#include "embedding/table.h"
#include "hb.h"

struct hb_embedding {
  hb_context *ctx = nullptr;
  std::unique_ptr<hb::emb::Table> table;           // sharded
  std::unique_ptr<hb::emb::ServingTable> serving;  // opened from a file
};
