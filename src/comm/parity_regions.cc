#include "comm/parity_regions.h"

#include <gloo/context.h>
#include <gloo/transport/buffer.h>
#include <gloo/transport/pair.h>

namespace hb {
namespace comm {

ParityRegions::ParityRegions() = default;
ParityRegions::~ParityRegions() = default;

void ParityRegions::init(gloo::Context &ctx, int slot_base, size_t region_bytes,
                         size_t send_bytes) {
  const size_t n = size_t(ctx.size);
  ctx_ = &ctx;
  slot_base_ = slot_base;
  region_bytes_ = region_bytes;
  send_bytes_ = send_bytes;
  peers_ = 0;
  recv_ = std::vector<Scratch>(n * 2);
  to_.clear();
  from_.clear();
  to_.resize(n * 2);
  from_.resize(n * 2);
  for (int b = 0; b < 2; ++b) send_[b].ensure(send_bytes, true);
}

void ParityRegions::register_peer(int q) {
  if (q == ctx_->rank || registered(q)) return;
  auto &pair = ctx_->getPair(q);
  for (int b = 0; b < 2; ++b) {
    const size_t i = size_t(q) * 2 + size_t(b);
    from_[i] = pair->createRecvBuffer(
        slot_base_ + b, recv_[i].ensure(region_bytes_, true), region_bytes_);
    to_[i] =
        pair->createSendBuffer(slot_base_ + b, send_[b].data(), send_bytes_);
  }
  ++peers_;
}

void ParityRegions::register_all(gloo::Context &ctx, int slot_base,
                                 size_t region_bytes, size_t send_bytes) {
  init(ctx, slot_base, region_bytes, send_bytes);
  for (int q = 0; q < ctx.size; ++q) register_peer(q);
}

size_t ParityRegions::reserved_bytes() const {
  if (!initialized()) return 0;
  return 2 * (peers_ * region_bytes_ + send_bytes_);
}

void ParityRegions::reset() {
  to_.clear();
  from_.clear();
}

}  // namespace comm
}  // namespace hb
