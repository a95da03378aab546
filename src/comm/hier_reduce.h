// The rank-order reduction (comm/rank_order.h) routed through one leader
// per host (comm/hier_alltoallv.h), for worlds of several hosts: a rank
// sends about hosts - 1 network messages per round (leaders) or none (the
// others) instead of world - 1.
//
// Same bits as rank_order_reduce: both rounds of the rank-order reduction
// are alltoallv-shaped (each rank sends each owner its part of the owner's
// block; each owner sends its reduced block to every rank), so each round
// is one hier_alltoallv, and the owner folds the n contributions exactly
// as rank_order_reduce does (fold_in_rank_order, rank 0, 1, 2, ...).
//
// Why no partial sums on the way: op(...op(op(x0, x1), x2)..., x{n-1}) is
// a left fold, and floating-point sums are not associative, so a leader
// could only pre-combine a prefix of the ranks (x0..x{k}); the ranks of
// every later host must reach the owner one by one. The leaders therefore
// carry every rank's contribution: the network carries the same bytes as
// the direct route, in fewer, larger messages.
#pragma once

#include "comm/hier_alltoallv.h"
#include "comm/rank_order.h"

namespace hb {
namespace comm {

class Scratch;

// As rank_order_reduce (same arguments, same result), each round routed
// through the leaders of g over p2p (shared memory within a host, TCP
// between hosts), in pieces of about op.piece_bytes per rank (bounding
// the leader's buffers). channel carries the first round (contributions to
// the owners), channel + 1 the second (the owners' reduced blocks).
void hier_rank_order_reduce(P2P &p2p, const HostGroups &g, HierScratch &hs,
                            int channel, const RankOrderOp &op, const char *x,
                            const Blocks &b, char *own_out, char *gather,
                            Scratch &peer_scratch);

// The most bytes one host's leader sends another's on one channel in such
// a call (all pieces): what a leader's registered regions must hold per
// peer and channel (comm/region_p2p.h) for the call to take them. SIZE_MAX
// when some host owns no element of b: some pair of leaders would then
// exchange nothing one way, and the regions' call parity needs a message
// each way in every call.
size_t hier_leader_bytes(const HostGroups &g, const Blocks &b, size_t es,
                         bool gather);

}  // namespace comm
}  // namespace hb
