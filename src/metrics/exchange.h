// Gathers every rank's serialized metric state with the internal
// communicator (comm/communicator.h):
// an allgather of the sizes, then an allgatherv of the bytes (HB_UINT8).
#pragma once

#include <cstdint>
#include <vector>

#include "common/mismatch.h"
#include "hb.h"
#include "metrics/wire.h"

namespace hb {
namespace metrics {

struct Gathered {
  Bytes bytes;  // every rank's bytes, in rank order
  std::vector<int64_t> sizes, offsets;
};

// What a rank's hb_metric_result is merging: checked across ranks in the
// size exchange, so ranks merging different metrics (kind or config) or at
// different points of a metric's merge sequence all fail with
// HB_ERR_MISMATCH. Configs travel as their fingerprint; when those differ,
// the ranks exchange the fields and the message names each one that
// differs with every rank's value.
struct MergeSig {
  int64_t kind = 0;
  const ConfigFields *config = nullptr;  // config_fields of the metric
  int64_t seq = 0;                       // matched merges of this metric so far
  int64_t *counter = nullptr;  // advanced once the ranks' signatures match
};

// Collective over ctx.
Gathered allgather_bytes(hb_context *ctx, const Bytes &mine,
                         const MergeSig &sig);

}  // namespace metrics
}  // namespace hb
