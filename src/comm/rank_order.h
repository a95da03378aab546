// Reductions in rank order: every element of the result is
// op(...op(op(x0, x1), x2)..., x{n-1}), where xr is rank r's input. That
// order depends neither on where the element sits in the buffer nor on the
// buffer's length, so every rank gets the same bits, and a tensor reduced
// alone, packed into a fused bucket or reduced through reduce_scatter gets
// the same bits too -- with no scratch copy of the caller's buffers.
//
// Each rank owns a block of the elements. Every rank sends each owner its
// part of the owner's block (reduce phase: each rank sends and receives
// (n-1)/n of the buffer, like a ring's reduce-scatter, but directly), the
// owner folds the n contributions in rank order, then (allreduce) sends its
// reduced block to every rank (gather phase). Blocks travel in pieces, so
// the owner folds piece k while piece k+1 is still arriving and sends it on
// at once. For small buffers one round is cheaper than two: every rank then
// owns the whole buffer (each sends all of it to every peer and folds all
// n inputs itself, same bits).
#pragma once

#include <cstddef>
#include <vector>

#include "comm/reduce_kernels.h"

namespace hb {
namespace comm {

class P2P;
class Scratch;

struct RankOrderOp {
  size_t elem_size;   // bytes of one wire element
  ReduceFn acc;       // x op= y
  CombineFn combine;  // out = op(a, b)
  size_t piece_bytes = size_t(4) << 20;
};

// What each rank reduces: rank p owns elements [lo[p], lo[p] + len[p]).
// Either disjoint blocks or, for the one-round form, the same block for all.
struct Blocks {
  std::vector<size_t> lo, len;
  bool shared = false;  // every rank owns the same block
  static Blocks balanced(size_t count, int world);  // allreduce
  static Blocks equal(size_t per_rank, int world);  // reduce_scatter
  static Blocks whole(size_t count, int world);     // one round
};

// out = op(...op(op(in[0], in[1]), in[2])..., in[n-1]) for len elements,
// in[r] being this rank's. acc is scratch for n > 2: the buffer in[acc_rank]
// points to, acc_rank = (r == 0 ? 1 : 0), which the fold may overwrite.
// out may be exactly in[r].
void fold_in_rank_order(const RankOrderOp &op, int n, int r,
                        const char *const *in, char *out, size_t len);
inline int fold_acc_rank(int r) { return r == 0 ? 1 : 0; }
// The same fold when no input may be written (they are peers' shared
// memory): it accumulates in out, which is none of the n >= 2 inputs.
void fold_in_rank_order_into(const RankOrderOp &op, int n,
                             const char *const *in, char *out, size_t len);

// x holds this rank's input (all blocks' elements, as laid out by b).
// own_out receives the reduced elements of this rank's block; gather, when
// not NULL, receives every rank's reduced block at its offset (allreduce:
// own_out == gather + lo[rank]). own_out may be exactly x + lo[rank] (in
// place), and gather may be exactly x. peer_scratch is reused across calls.
void rank_order_reduce(P2P &p2p, const RankOrderOp &op, const char *x,
                       const Blocks &b, char *own_out, char *gather,
                       Scratch &peer_scratch);

}  // namespace comm
}  // namespace hb
