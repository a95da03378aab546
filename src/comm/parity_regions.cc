#include "comm/parity_regions.h"

#include <gloo/context.h>
#include <gloo/transport/buffer.h>
#include <gloo/transport/pair.h>

namespace hb {
namespace comm {

ParityRegions::ParityRegions() = default;
ParityRegions::~ParityRegions() = default;

void ParityRegions::register_all(gloo::Context &ctx, int slot_base,
                                 size_t region_bytes, size_t send_bytes,
                                 const std::vector<bool> *peers) {
  const int n = ctx.size;
  recv_ = std::vector<Scratch>(size_t(n) * 2);
  to_.resize(size_t(n) * 2);
  from_.resize(size_t(n) * 2);
  for (int b = 0; b < 2; ++b) send_[b].ensure(send_bytes, true);
  for (int q = 0; q < n; ++q) {
    if (q == ctx.rank || (peers && !(*peers)[size_t(q)])) continue;
    auto &pair = ctx.getPair(q);
    for (int b = 0; b < 2; ++b) {
      const size_t i = size_t(q) * 2 + size_t(b);
      from_[i] = pair->createRecvBuffer(
          slot_base + b, recv_[i].ensure(region_bytes, true), region_bytes);
      to_[i] =
          pair->createSendBuffer(slot_base + b, send_[b].data(), send_bytes);
    }
  }
}

void ParityRegions::reset() {
  to_.clear();
  from_.clear();
}

}  // namespace comm
}  // namespace hb
