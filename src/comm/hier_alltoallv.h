// A two-level alltoallv for worlds of several hosts with several ranks each:
// one leader per host (its lowest rank) carries all of its host's
// cross-host traffic, so a rank sends about hosts - 1 messages over the
// network per call (leaders) or none (the others) instead of world - 1
// (docs/scaling.md: per-message costs dominate the collection's step from
// ~64 ranks). Blocks only move, so the result is the same bits as the
// direct exchange (comm/p2p_collectives.h); only the route differs.
//
// One call, over a P2P that reaches same-host peers by shared memory and
// the others by TCP (comm/routed_p2p.h):
//   1. same-host blocks go directly between the host's ranks;
//   2. each other rank sends its leader its counts (2 x world int64: what
//      it sends to and receives from every rank) and one message holding
//      its blocks for every other host, in (host, rank) order;
//   3. leaders exchange one message per pair of hosts: for each receiving
//      rank j of the destination host, the blocks of the sending host's
//      ranks i for j, in rank order (sizes known on both sides from the
//      counts, so no size round crosses the network);
//   4. each leader sends each of its ranks one message: that rank's blocks
//      from every other host, in (host, rank) order.
// A lost rank fails every wait as the P2P's do (HB_ERR_PEER_FAILED through
// the backend's health subscription), so no round hangs.
//
// The leaders' messages (3.) may go on pair buffers registered once
// (comm/region_p2p.h: one hop, no per-call buffer; the p2p is then a
// SplitP2P under the routing): a message of at most region_fit bytes goes
// there, a larger one on per-call buffers. Both leaders know its size from
// the counts round (2.), so both choose alike. The regions' double
// buffering needs one message each way between every two leaders in every
// call that takes them, so an empty or oversized message is replaced there
// by a one-byte token.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hb {
namespace comm {

class P2P;

// The hosts of a world, from each rank's host leader (ShmTransport::
// host_leaders()): hosts in the order of their leaders, ranks ascending.
struct HostGroups {
  std::vector<int> host_of;               // rank -> host
  std::vector<std::vector<int>> members;  // host -> ranks, leader first
  // Empty leaders (hosts not well defined) give no hosts.
  static HostGroups from_leaders(const std::vector<int> &leaders);
  // More than one host, and some host with more than one rank: where the
  // two levels send fewer network messages than the direct exchange.
  bool hierarchical() const;
};

// Reusable buffers of the leader's packing (kept across calls).
struct HierScratch {
  std::vector<std::vector<int64_t>> counts;  // per member: sends, recvs
  std::vector<std::vector<char>> up, down;   // per member
  std::vector<std::vector<char>> out, in;    // per host
  std::vector<char> mine_up, mine_down;      // a non-leader's
  std::vector<char> tokens;                  // per (host, direction)
};

// As p2p_alltoallv (same arguments, same result), routed through the
// leaders of g. Counts must be consistent across ranks (checked by the
// caller's fingerprint, or the sizes of the messages differ and the
// transport fails the call). region_fit: 0, or the registered regions'
// bytes per (peer, channel) when p2p is a SplitP2P (see above; the same on
// every rank).
void hier_alltoallv(P2P &p2p, const HostGroups &g, HierScratch &s, int channel,
                    const char *send, const int64_t *send_counts,
                    const int64_t *send_offsets, char *recv,
                    const int64_t *recv_counts, const int64_t *recv_offsets,
                    size_t es, size_t region_fit = 0);

}  // namespace comm
}  // namespace hb
