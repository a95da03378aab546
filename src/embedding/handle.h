// The hb_embedding handle: a sharded table on a context, or a read-only
// serving table opened from an export file. Internal (benchmarks read the
// table's Stats through it).
#pragma once

#include <memory>
#include <string>

#include "context/context.h"
#include "embedding/device_table.h"
#include "embedding/serving.h"
#include "embedding/table.h"
#include "hb.h"

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
  std::unique_ptr<hb::emb::ServingTable> serving;  // opened from a file
};
