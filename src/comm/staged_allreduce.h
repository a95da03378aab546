// The rank-order reduction (comm/rank_order.h) for small and medium
// buffers, over Gloo pair buffers registered once: a message then goes
// straight into the peer's memory in one hop, where a per-call (unbound)
// buffer first waits for the receiver's "ready" notice and is sent from the
// sender's event-loop thread -- several thread hand-offs per message, which
// dominate below a few MiB (measured: 4 KiB at 4 ranks took 5x longer).
// The price is a copy of the input into the registered send region and of
// the gathered blocks out of the receive regions, cheap at these sizes.
//
// Regions are double-buffered by call parity: a peer can run at most one
// call ahead of this rank (it cannot finish call t+1 without this rank's
// data of call t+1, sent after this rank finished call t), so its data of
// the next call never lands in a region still being read.
#pragma once

#include <memory>
#include <vector>

#include "comm/parity_regions.h"
#include "comm/rank_order.h"

namespace gloo {
class Context;
}  // namespace gloo

namespace hb {
namespace comm {

class StagedAllreduce {
 public:
  // Takes two slots of ctx now (call it at the same point on every rank);
  // buffers are registered on first use. max_bytes bounds the input of a
  // call, one_round_bytes the shared-block (one round) form.
  StagedAllreduce(gloo::Context &ctx, size_t max_bytes, size_t one_round_bytes);
  ~StagedAllreduce();

  // True when a call over this many input bytes fits the regions.
  bool fits(size_t bytes) const { return bytes <= max_bytes_; }
  // As rank_order_reduce (blocks, own_out, gather), the input being copied
  // first so x may alias anything.
  void run(const RankOrderOp &op, const char *x, const Blocks &b, char *own_out,
           char *gather);

 private:
  gloo::Context &ctx_;
  int slot_base_;
  size_t max_bytes_;
  size_t region_bytes_;  // per peer and parity: two halves (reduce, gather)
  uint64_t calls_ = 0;
  ParityRegions regions_;
  // Per-call working lists, kept so a small call allocates nothing.
  std::vector<int> sends_;
  std::vector<const char *> inputs_;
};

}  // namespace comm
}  // namespace hb
