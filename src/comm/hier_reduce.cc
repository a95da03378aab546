#include "comm/hier_reduce.h"

#include <algorithm>
#include <vector>

#include "comm/p2p.h"
#include "comm/scratch.h"

namespace hb {
namespace comm {

void hier_rank_order_reduce(P2P &p2p, const HostGroups &g, HierScratch &hs,
                            int channel, const RankOrderOp &op, const char *x,
                            const Blocks &b, char *own_out, char *gather,
                            Scratch &peer_scratch) {
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
  hier_alltoallv(p2p, g, hs, channel, own_out, sc.data(), so.data(), gather,
                 rc.data(), ro.data(), es);
}

}  // namespace comm
}  // namespace hb
