#include "comm/hier_reduce.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "comm/p2p.h"
#include "comm/scratch.h"

namespace hb {
namespace comm {

namespace {

// One piece: both rounds over blocks b (offsets into x and gather; own_out
// is this rank's block of this piece).
void reduce_piece(P2P &p2p, const HostGroups &g, HierScratch &hs, int channel,
                  const RankOrderOp &op, const char *x, const Blocks &b,
                  char *own_out, char *gather, Scratch &peer_scratch) {
  const int n = p2p.world_size(), r = p2p.rank();
  const size_t es = op.elem_size, nn = size_t(n);
  const int64_t mine = int64_t(b.len[size_t(r)]);
  // Peer q's part of my block lands in slot q (q < r) or q - 1: as in
  // rank_order_reduce. My own part stays in x (count 0 to myself).
  char *slots =
      peer_scratch.ensure(std::max<size_t>(1, (nn - 1) * size_t(mine) * es));
  std::vector<int64_t> sc(nn), so(nn), rc(nn), ro(nn);
  for (int q = 0; q < n; ++q) {
    const size_t u = size_t(q);
    sc[u] = q == r ? 0 : int64_t(b.len[u]);
    so[u] = int64_t(b.lo[u]);
    rc[u] = q == r ? 0 : mine;
    ro[u] = q == r ? 0 : int64_t(q < r ? q : q - 1) * mine;
  }
  hier_alltoallv(p2p, g, hs, channel, x, sc.data(), so.data(), slots, rc.data(),
                 ro.data(), es);

  // Every send of x is complete: own_out may now overwrite it (in place).
  std::vector<const char *> in(nn);
  for (int q = 0; q < n; ++q)
    in[size_t(q)] =
        q == r ? x + b.lo[size_t(r)] * es : slots + size_t(ro[size_t(q)]) * es;
  fold_in_rank_order(op, n, r, in.data(), own_out, size_t(mine));
  if (!gather) return;

  // Gather: my reduced block to every rank, theirs to their offsets.
  for (int q = 0; q < n; ++q) {
    const size_t u = size_t(q);
    sc[u] = q == r ? 0 : mine;
    so[u] = 0;
    rc[u] = q == r ? 0 : int64_t(b.len[u]);
    ro[u] = int64_t(b.lo[u]);
  }
  hier_alltoallv(p2p, g, hs, channel + 1, own_out, sc.data(), so.data(), gather,
                 rc.data(), ro.data(), es);
}

}  // namespace

void hier_rank_order_reduce(P2P &p2p, const HostGroups &g, HierScratch &hs,
                            int channel, const RankOrderOp &op, const char *x,
                            const Blocks &b, char *own_out, char *gather,
                            Scratch &peer_scratch) {
  // In pieces of about piece_bytes per rank (piece_bytes / n of every
  // block): a leader buffers its members' parts of a piece, so its memory
  // stays ~3 x ranks-per-host x piece_bytes whatever the buffer's size.
  // Each element's fold is the same in any piece, so are the bits.
  const size_t n = size_t(p2p.world_size()), r = size_t(p2p.rank());
  const size_t piece = std::max<size_t>(1, op.piece_bytes / (op.elem_size * n));
  size_t most = 0;
  for (size_t len : b.len) most = std::max(most, len);
  Blocks part = b;
  for (size_t at = 0; at == 0 || at < most; at += piece) {
    for (size_t q = 0; q < n; ++q) {
      const size_t len = b.len[q] > at ? std::min(piece, b.len[q] - at) : 0;
      part.lo[q] = b.lo[q] + std::min(at, b.len[q]);
      part.len[q] = len;
    }
    reduce_piece(p2p, g, hs, channel, op, x, part,
                 own_out + std::min(at, b.len[r]) * op.elem_size, gather,
                 peer_scratch);
  }
}

size_t hier_leader_bytes(const HostGroups &g, const Blocks &b, size_t es,
                         bool gather) {
  // Per host: ranks and elements owned. Round 1: leader A sends leader B
  // each A rank's part of every B rank's block (m_A x owned_B); round 2:
  // every A rank's reduced block to every B rank (m_B x owned_A).
  const size_t nh = g.members.size();
  std::vector<size_t> owned(nh, 0);
  for (size_t h = 0; h < nh; ++h)
    for (int q : g.members[h]) owned[h] += b.len[size_t(q)];
  size_t most = 0;
  for (size_t a = 0; a < nh; ++a) {
    if (owned[a] == 0) return SIZE_MAX;
    for (size_t c = 0; c < nh; ++c) {
      if (a == c) continue;
      most = std::max(most, g.members[a].size() * owned[c] * es);
      if (gather) most = std::max(most, g.members[c].size() * owned[a] * es);
    }
  }
  return most;
}

}  // namespace comm
}  // namespace hb
