// A fixed-size all-to-all over Gloo pair buffers registered once
// (comm/parity_regions.h): what the
// call fingerprints (comm/fingerprint.h) travel on between TCP peers, in
// one hop per message (a per-call buffer's hand-offs cost more than a
// 1 MiB allreduce's data at 4 ranks). Regions are double-buffered by call
// parity: every rank sends to every peer each time, so no peer can be two
// exchanges ahead of a region's reader.
#pragma once

#include <cstddef>
#include <cstdint>

#include "comm/parity_regions.h"

namespace gloo {
class Context;
}  // namespace gloo

namespace hb {
namespace comm {

class PairExchange {
 public:
  // Takes two slots of ctx now (call it at the same point on every rank);
  // buffers are registered on first use.
  PairExchange(gloo::Context &ctx, size_t bytes);
  ~PairExchange();
  // all holds world x bytes: this rank's message at rank x bytes on entry,
  // every rank's on return.
  void run(char *all);
  // What its regions take: 2 x world x bytes per rank, N^2 over N ranks
  // (docs/scaling.md).
  size_t reserved_bytes() const { return regions_.reserved_bytes(); }

 private:
  gloo::Context &ctx_;
  int slot_base_;
  size_t bytes_;
  uint64_t calls_ = 0;
  ParityRegions regions_;
};

}  // namespace comm
}  // namespace hb
