#include "comm/staged_allreduce.h"

#include <gloo/context.h>
#include <gloo/transport/buffer.h>
#include <gloo/transport/pair.h>

#include <algorithm>
#include <cstring>

namespace hb {
namespace comm {

StagedAllreduce::StagedAllreduce(gloo::Context &ctx, size_t max_bytes,
                                 size_t one_round_bytes)
    : ctx_(ctx), slot_base_(ctx.nextSlot(2)), max_bytes_(max_bytes) {
  // A block is at most ceil(max_bytes / n) rounded up to an element; the
  // one-round form puts a whole buffer in a region.
  const size_t n = size_t(ctx.size);
  const size_t half = (max_bytes + n - 1) / n + 64;
  region_bytes_ = std::max(2 * half, one_round_bytes + 64);
}

StagedAllreduce::~StagedAllreduce() = default;

void StagedAllreduce::run(const RankOrderOp &op, const char *x, const Blocks &b,
                          char *own_out, char *gather) {
  if (!regions_.registered())
    regions_.register_all(ctx_, slot_base_, region_bytes_, max_bytes_ + 64);
  const int n = ctx_.size, r = ctx_.rank;
  const size_t es = op.elem_size, parity = size_t(calls_++ & 1);
  const size_t mine = b.len[size_t(r)], my_lo = b.lo[size_t(r)];
  size_t total = 0;
  for (int q = 0; q < n; ++q)
    total = std::max(total, b.lo[size_t(q)] + b.len[size_t(q)]);
  char *staged = regions_.send(parity);
  std::memcpy(staged, x, total * es);
  const size_t gather_at = region_bytes_ / 2;
  auto to = [&](int q) { return regions_.to(q, parity); };
  auto from = [&](int q) { return regions_.from(q, parity); };
  auto region = [&](int q) { return regions_.region(q, parity); };
  std::vector<int> &sends = sends_;
  sends.assign(size_t(n), 0);

  // Reduce phase: each owner gets its block (everything, when shared).
  for (int j = 1; j < n; ++j) {
    const int q = (r + j) % n;
    if (b.len[size_t(q)] == 0) continue;
    to(q)->send(b.lo[size_t(q)] * es, b.len[size_t(q)] * es, 0);
    ++sends[size_t(q)];
  }
  if (mine) {
    std::vector<const char *> &in = inputs_;
    in.resize(static_cast<size_t>(n));
    for (int q = 0; q < n; ++q) {
      if (q == r) continue;
      from(q)->waitRecv();
      in[size_t(q)] = region(q);
    }
    in[size_t(r)] = staged + my_lo * es;
    // Gathering, the result is sent from the staged region.
    char *out = gather ? staged + my_lo * es : own_out;
    fold_in_rank_order(op, n, r, in.data(), out, mine);
    if (gather) {
      for (int j = 1; j < n; ++j) {
        const int q = (r + j) % n;
        to(q)->send(my_lo * es, mine * es, gather_at);
        ++sends[size_t(q)];
      }
      std::memcpy(own_out, out, mine * es);
    }
  }
  if (gather)
    for (int q = 0; q < n; ++q) {
      if (q == r || b.len[size_t(q)] == 0) continue;
      from(q)->waitRecv();
      std::memcpy(gather + b.lo[size_t(q)] * es, region(q) + gather_at,
                  b.len[size_t(q)] * es);
    }
  // The staged region is reused two calls later: our sends must be out.
  for (int q = 0; q < n; ++q)
    for (int k = 0; k < sends[size_t(q)]; ++k) to(q)->waitSend();
}

}  // namespace comm
}  // namespace hb
