#include "comm/pair_exchange.h"

#include <gloo/context.h>
#include <gloo/transport/buffer.h>

#include <cstring>

namespace hb {
namespace comm {

PairExchange::PairExchange(gloo::Context &ctx, size_t bytes)
    : ctx_(ctx), slot_base_(ctx.nextSlot(2)), bytes_(bytes) {}

PairExchange::~PairExchange() = default;

void PairExchange::run(char *all) {
  const int n = ctx_.size, r = ctx_.rank;
  if (!regions_.initialized())
    regions_.register_all(ctx_, slot_base_, bytes_, bytes_);
  const size_t parity = size_t(calls_++ & 1);
  std::memcpy(regions_.send(parity), all + size_t(r) * bytes_, bytes_);
  for (int j = 1; j < n; ++j)
    regions_.to((r + j) % n, parity)->send(0, bytes_, 0);
  for (int q = 0; q < n; ++q) {
    if (q == r) continue;
    regions_.from(q, parity)->waitRecv();
    std::memcpy(all + size_t(q) * bytes_, regions_.region(q, parity), bytes_);
  }
  for (int q = 0; q < n; ++q)
    if (q != r) regions_.to(q, parity)->waitSend();
}

}  // namespace comm
}  // namespace hb
