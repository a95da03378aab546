// Fingerprints of collective calls (issue #12): before any rank posts a
// message whose size depends on its arguments, the ranks exchange what
// they were called with -- operation, dtype, op, root, counts or per-peer
// counts, and the call's sequence number -- and every rank checks every
// rank's print. A mismatch becomes HB_ERR_MISMATCH on every rank (they all
// see the same prints, so they reach the same verdict) naming the
// operation and the ranks that differ, instead of a transport error on a
// size mismatch, or a hang. The exchange completes on every rank before
// the verdict, so the transports stay consistent and the context usable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hb.h"

namespace hb {
namespace comm {

class P2P;

struct CallPrint {
  enum Kind : uint32_t {
    kAllreduce = 1,
    kAllreduceMany,
    kReduceScatter,
    kAllgatherv,
    kAlltoallv,
    kBroadcast,
    // alltoallv_sized (comm/backend.h): the sizes travel with the data, so
    // the print has no counts.
    kAlltoallvSized,
  };
  uint32_t kind = 0;
  int32_t dtype = -1, op = -1, root = -1;
  uint64_t seq = 0;
  uint64_t count = 0;  // elements (allreduce_many: the sum)
  uint64_t extra = 0;  // allreduce_many: a hash of the tensor counts
  // allgatherv: recv_counts; alltoallv: send_counts then recv_counts
  // (world entries each); empty otherwise.
  std::vector<int64_t> counts;

  // The wire form: the same size on every rank of a world.
  static size_t wire_bytes(int world);
  void to_wire(int world, char *out) const;
  static CallPrint from_wire(int world, const char *in);
  // A 64-bit digest of a wire form: equal digests stand for equal prints
  // (two prints that differ in one 8-byte word never share a digest; any
  // other pair does with odds of about 2^-64).
  static uint64_t wire_hash(const char *wire, size_t bytes);
};

// Throws hb::Error(HB_ERR_MISMATCH) unless the prints (one per rank) are of
// one consistent call.
void check_prints(const std::vector<CallPrint> &prints);

// Exchanges mine with every peer over p2p on `channel` (a small message
// each way), then check_prints.
void check_call(P2P &p2p, int channel, const CallPrint &mine);
// The same over a fixed-size all-to-all: exchange(all) gets this rank's
// wire form at rank x CallPrint::wire_bytes(world) and fills the others'.
void check_call(int rank, int world,
                const std::function<void(char *)> &exchange,
                const CallPrint &mine);

// Hash of the tensor counts of an allreduce_many call.
uint64_t hash_counts(const size_t *counts, size_t n);

}  // namespace comm
}  // namespace hb
