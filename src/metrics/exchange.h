// Gathers every rank's serialized metric state with the public collectives:
// hb_allgather of the sizes, then hb_allgatherv of the bytes (HB_UINT8).
#pragma once

#include <cstdint>
#include <vector>

#include "hb.h"

namespace hb {
namespace metrics {

struct Gathered {
  std::vector<unsigned char> bytes;  // every rank's bytes, in rank order
  std::vector<int64_t> sizes, offsets;
};

// Collective over ctx.
Gathered allgather_bytes(hb_context *ctx, const std::vector<unsigned char> &mine);

}  // namespace metrics
}  // namespace hb
