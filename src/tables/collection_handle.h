// The hb_collection handle (internal: checkpoints register its tables).
#pragma once

#include <memory>
#include <vector>

#include "embedding/collection.h"
#include "hb.h"

struct hb_collection {
  hb_context *ctx = nullptr;
  std::unique_ptr<hb::emb::CollectionBase> coll;
  // Its features' tables, each once, in feature order.
  std::vector<hb_embedding *> tables;
};
