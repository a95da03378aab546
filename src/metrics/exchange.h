// Gathers every rank's serialized metric state with the internal
// communicator (comm/communicator.h):
// an allgather of the sizes, then an allgatherv of the bytes (HB_UINT8).
#pragma once

#include <cstdint>
#include <vector>

#include "hb.h"
#include "metrics/wire.h"

namespace hb {
namespace metrics {

struct Gathered {
  Bytes bytes;  // every rank's bytes, in rank order
  std::vector<int64_t> sizes, offsets;
};

// Collective over ctx.
Gathered allgather_bytes(hb_context *ctx, const Bytes &mine);

}  // namespace metrics
}  // namespace hb
