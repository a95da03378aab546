#include "comm/rank_order.h"

#include <algorithm>
#include <cstring>

#include "comm/p2p.h"
#include "comm/scratch.h"

namespace hb {
namespace comm {

namespace {
constexpr int kReduceChannel = 0;
constexpr int kGatherChannel = 1;

size_t num_pieces(size_t len, size_t piece) {
  return (len + piece - 1) / piece;
}
}  // namespace

void fold_in_rank_order(const RankOrderOp &op, int n, int r,
                        const char *const *in, char *out, size_t len) {
  if (n == 1) {
    if (out != in[0]) std::memcpy(out, in[0], len * op.elem_size);
    return;
  }
  if (n == 2) {
    op.combine(out, in[0], in[1], len);
    return;
  }
  // The accumulator is a peer's buffer: my own input may be the output.
  char *acc = const_cast<char *>(in[fold_acc_rank(r)]);
  op.combine(acc, in[0], in[1], len);
  for (int p = 2; p < n - 1; ++p) op.acc(acc, in[p], len);
  op.combine(out, acc, in[n - 1], len);
}

void fold_in_rank_order_into(const RankOrderOp &op, int n,
                             const char *const *in, char *out, size_t len) {
  if (len == 0) return;
  op.combine(out, in[0], in[1], len);
  for (int p = 2; p < n; ++p) op.acc(out, in[p], len);
}

Blocks Blocks::balanced(size_t count, int world) {
  Blocks b;
  const size_t n = size_t(world), base = count / n, extra = count % n;
  size_t at = 0;
  for (size_t p = 0; p < n; ++p) {
    b.lo.push_back(at);
    b.len.push_back(base + (p < extra ? 1 : 0));
    at += b.len.back();
  }
  return b;
}

Blocks Blocks::equal(size_t per_rank, int world) {
  Blocks b;
  for (int p = 0; p < world; ++p) {
    b.lo.push_back(size_t(p) * per_rank);
    b.len.push_back(per_rank);
  }
  return b;
}

Blocks Blocks::whole(size_t count, int world) {
  Blocks b;
  b.lo.assign(size_t(world), 0);
  b.len.assign(size_t(world), count);
  b.shared = true;
  return b;
}

void rank_order_reduce(P2P &p2p, const RankOrderOp &op, const char *x,
                       const Blocks &b, char *own_out, char *gather,
                       Scratch &peer_scratch) {
  const int n = p2p.world_size(), r = p2p.rank();
  const size_t es = op.elem_size;
  const size_t piece = std::max<size_t>(1, op.piece_bytes / es);
  const size_t mine = b.len[size_t(r)], my_lo = b.lo[size_t(r)];
  const size_t my_pieces = num_pieces(mine, piece);
  auto piece_len = [&](size_t len, size_t k) {
    return std::min(piece, len - k * piece);
  };

  // What each peer contributes to my block lands in its own scratch slot.
  char *slots = peer_scratch.ensure(std::max<size_t>(1, (n - 1) * mine * es));
  auto slot_of = [&](int q) {
    return slots + size_t(q < r ? q : q - 1) * mine * es;
  };

  // Post every receive first, so no peer's send waits for us to get there.
  std::vector<int> incoming(size_t(n) * my_pieces, -1);
  for (int q = 0; q < n; ++q)
    for (size_t k = 0; q != r && k < my_pieces; ++k)
      incoming[size_t(q) * my_pieces + k] =
          p2p.recv(q, kReduceChannel, slot_of(q) + k * piece * es,
                   piece_len(mine, k) * es);
  if (gather)
    for (int q = 0; q < n; ++q)
      for (size_t k = 0; q != r && k < num_pieces(b.len[size_t(q)], piece); ++k)
        p2p.recv(q, kGatherChannel, gather + (b.lo[size_t(q)] + k * piece) * es,
                 piece_len(b.len[size_t(q)], k) * es);

  // Reduce phase: piece k of every owner's block, peers in a rotated order
  // so that no owner is everyone's first target.
  size_t max_pieces = 0;
  for (int q = 0; q < n; ++q)
    max_pieces = std::max(max_pieces, num_pieces(b.len[size_t(q)], piece));
  std::vector<int> sent(size_t(n) * max_pieces, -1);
  for (size_t k = 0; k < max_pieces; ++k)
    for (int j = 1; j < n; ++j) {
      const int q = (r + j) % n;
      const size_t len = b.len[size_t(q)];
      if (k < num_pieces(len, piece))
        sent[size_t(q) * max_pieces + k] =
            p2p.send(q, kReduceChannel, x + (b.lo[size_t(q)] + k * piece) * es,
                     piece_len(len, k) * es);
    }

  // Fold my pieces as they arrive, in rank order.
  const bool out_is_input = own_out == x + my_lo * es;
  std::vector<const char *> in(static_cast<size_t>(n));
  for (size_t k = 0; k < my_pieces; ++k) {
    const size_t len = piece_len(mine, k);
    for (int q = 0; q < n; ++q)
      if (q != r) p2p.wait(incoming[size_t(q) * my_pieces + k]);
    // Sharing one block, my input is also what I send: it must be gone
    // before an in-place output overwrites it.
    if (b.shared && out_is_input)
      for (int q = 0; q < n; ++q)
        if (q != r) p2p.wait(sent[size_t(q) * max_pieces + k]);
    for (int p = 0; p < n; ++p)
      in[size_t(p)] =
          p == r ? x + (my_lo + k * piece) * es : slot_of(p) + k * piece * es;
    char *out = own_out + k * piece * es;
    fold_in_rank_order(op, n, r, in.data(), out, len);
    if (gather)
      for (int j = 1; j < n; ++j)
        p2p.send((r + j) % n, kGatherChannel, out, len * es);
  }
  p2p.finish();
}

}  // namespace comm
}  // namespace hb
