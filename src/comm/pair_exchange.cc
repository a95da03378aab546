#include "comm/pair_exchange.h"

#include <gloo/context.h>
#include <gloo/transport/buffer.h>
#include <gloo/transport/pair.h>

#include <cstring>

namespace hb {
namespace comm {

PairExchange::PairExchange(gloo::Context &ctx, size_t bytes)
    : ctx_(ctx), slot_base_(ctx.nextSlot(2)), bytes_(bytes) {}

PairExchange::~PairExchange() = default;

void PairExchange::run(char *all) {
  const int n = ctx_.size, r = ctx_.rank;
  if (to_.empty()) {  // (peer, parity) -> index, the same order on every rank
    recv_ = std::vector<Scratch>(size_t(n) * 2);
    to_.resize(size_t(n) * 2);
    from_.resize(size_t(n) * 2);
    for (int q = 0; q < n; ++q) {
      if (q == r) continue;
      auto &pair = ctx_.getPair(q);
      for (int b = 0; b < 2; ++b) {
        const size_t i = size_t(q) * 2 + size_t(b);
        from_[i] = pair->createRecvBuffer(
            slot_base_ + b, recv_[i].ensure(bytes_, true), bytes_);
        to_[i] = pair->createSendBuffer(slot_base_ + b,
                                        send_[b].ensure(bytes_, true), bytes_);
      }
    }
  }
  const size_t parity = size_t(calls_++ & 1);
  std::memcpy(send_[parity].data(), all + size_t(r) * bytes_, bytes_);
  for (int j = 1; j < n; ++j)
    to_[size_t((r + j) % n) * 2 + parity]->send(0, bytes_, 0);
  for (int q = 0; q < n; ++q) {
    if (q == r) continue;
    const size_t i = size_t(q) * 2 + parity;
    from_[i]->waitRecv();
    std::memcpy(all + size_t(q) * bytes_, recv_[i].data(), bytes_);
  }
  for (int q = 0; q < n; ++q)
    if (q != r) to_[size_t(q) * 2 + parity]->waitSend();
}

}  // namespace comm
}  // namespace hb
