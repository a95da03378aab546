#include "comm/region_p2p.h"

#include <gloo/context.h>
#include <gloo/transport/buffer.h>
#include <gloo/transport/pair.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "abi/error.h"

namespace hb {
namespace comm {

PairRegions::PairRegions(gloo::Context &ctx, size_t max_bytes,
                         size_t one_round_bytes)
    : PairRegions(ctx, max_bytes, one_round_bytes, std::vector<int>{}) {
  all_peers_ = true;
}

PairRegions::PairRegions(gloo::Context &ctx, size_t max_bytes,
                         size_t one_round_bytes, std::vector<int> peers)
    : ctx_(ctx),
      slot_base_(ctx.nextSlot(2)),
      max_bytes_(max_bytes),
      all_peers_(false),
      peers_(std::move(peers)) {
  // A block is at most ceil(max_bytes / n) rounded up to an element; the
  // one-round form sends a whole buffer, of at most one_round_bytes /
  // (n - 1), on one channel. Both shrink as 1/n, so the n - 1 peers' areas
  // together stay ~2 x 2 x max_bytes (sizing the one-round area by
  // one_round_bytes itself made them grow as 256 KiB x n).
  const size_t n = size_t(ctx.size), others = std::max<size_t>(1, n - 1);
  const size_t block = (max_bytes + n - 1) / n + 64;
  area_bytes_ = std::max(block, one_round_bytes / others + 64);
  // Sends: distinct pieces of the input (at most the input), then this
  // rank's reduced block.
  send_bytes_ = max_bytes + block + 64;
}

PairRegions::PairRegions(gloo::Context &ctx, std::vector<int> peers,
                         size_t area_bytes, size_t send_bytes)
    : ctx_(ctx),
      slot_base_(ctx.nextSlot(2)),
      area_bytes_(area_bytes),
      send_bytes_(send_bytes),
      all_peers_(false),
      peers_(std::move(peers)) {}

size_t PairRegions::reserved_bytes() const { return regions_.reserved_bytes(); }

PairRegions::~PairRegions() = default;

RegionP2P::RegionP2P(PairRegions &r) : r_(r), parity_(size_t(r.calls_++ & 1)) {
  // A rank with no peers here (not a leader) allocates nothing.
  if (!r_.regions_.initialized() && (r_.all_peers_ || !r_.peers_.empty())) {
    if (r_.all_peers_) {
      r_.regions_.register_all(r_.ctx_, r_.slot_base_,
                               r_.area_bytes_ * kChannels, r_.send_bytes_);
    } else {
      r_.regions_.init(r_.ctx_, r_.slot_base_, r_.area_bytes_ * kChannels,
                       r_.send_bytes_);
      for (int q : r_.peers_) r_.regions_.register_peer(q);
    }
  }
  const size_t n = size_t(r_.ctx_.size);
  r_.out_at_.assign(n * kChannels, 0);
  r_.in_at_.assign(n * kChannels, 0);
  for (auto *v : {&r_.sends_, &r_.sends_done_, &r_.recvs_, &r_.arrived_})
    v->assign(n, 0);
  r_.ops_.clear();
}

// On the error path (peer lost, timeout) the pairs are failed already;
// nothing is left to wait for.
RegionP2P::~RegionP2P() = default;

int RegionP2P::rank() const { return r_.ctx_.rank; }
int RegionP2P::world_size() const { return r_.ctx_.size; }

size_t RegionP2P::area_offset(std::vector<size_t> &at, int peer, int channel,
                              size_t bytes, const char *what) {
  if (bytes == 0 || peer == rank() || peer < 0 || peer >= world_size() ||
      channel < 0 || channel >= kChannels || !r_.regions_.registered(peer))
    fail(HB_ERR_INTERNAL,
         "registered p2p: bad %s (peer %d, channel %d, %zu bytes)", what, peer,
         channel, bytes);
  size_t &used = at[size_t(peer) * kChannels + size_t(channel)];
  if (used + bytes > r_.area_bytes_)
    fail(HB_ERR_INTERNAL,
         "registered p2p: %s of %zu bytes overflows the %zu-byte region of "
         "channel %d (after %zu bytes)",
         what, bytes, r_.area_bytes_, channel, used);
  size_t off = size_t(channel) * r_.area_bytes_ + used;
  used += bytes;
  return off;
}

size_t RegionP2P::staged(const void *data, size_t bytes) {
  if (data == last_data_ && bytes == last_bytes_) return last_at_;
  if (send_used_ + bytes > r_.send_bytes_)
    fail(HB_ERR_INTERNAL,
         "registered p2p: sends of this call exceed the %zu-byte send region",
         r_.send_bytes_);
  char *region = r_.regions_.send(parity_);
  std::memcpy(region + send_used_, data, bytes);
  last_data_ = data;
  last_bytes_ = bytes;
  last_at_ = send_used_;
  send_used_ += bytes;
  return last_at_;
}

int RegionP2P::send(int peer, int channel, const void *data, size_t bytes) {
  const size_t remote = area_offset(r_.out_at_, peer, channel, bytes, "send");
  const size_t local = staged(data, bytes);
  r_.regions_.to(peer, parity_)->send(local, bytes, remote);
  ++r_.messages_;
  r_.ops_.push_back(
      {peer, true, false, r_.sends_[size_t(peer)]++, nullptr, nullptr, bytes});
  return static_cast<int>(r_.ops_.size()) - 1;
}

int RegionP2P::recv(int peer, int channel, void *data, size_t bytes) {
  const size_t off = area_offset(r_.in_at_, peer, channel, bytes, "receive");
  r_.ops_.push_back({peer, false, false, r_.recvs_[size_t(peer)]++,
                     r_.regions_.region(peer, parity_) + off, data, bytes});
  return static_cast<int>(r_.ops_.size()) - 1;
}

void RegionP2P::wait(int id) {
  PairRegions::Op &op = r_.ops_.at(static_cast<size_t>(id));
  if (op.done) return;
  const size_t q = size_t(op.peer);
  if (op.is_send) {
    // Sends on a buffer complete in order.
    while (r_.sends_done_[q] <= op.seq) {
      r_.regions_.to(op.peer, parity_)->waitSend();
      ++r_.sends_done_[q];
    }
    last_data_ = nullptr;  // the caller may now reuse what it sent
  } else {
    // Messages from a peer arrive in its sending order (see the header).
    while (r_.arrived_[q] <= op.seq) {
      r_.regions_.from(op.peer, parity_)->waitRecv();
      ++r_.arrived_[q];
    }
    std::memcpy(op.to, op.from, op.bytes);
  }
  op.done = true;
}

void RegionP2P::finish() {
  for (size_t i = 0; i < r_.ops_.size(); ++i) wait(static_cast<int>(i));
}

int SplitP2P::send(int peer, int channel, const void *data, size_t bytes) {
  const bool reg = channel >= kRegions;
  ops_.emplace_back(reg,
                    reg ? regions_.send(peer, channel - kRegions, data, bytes)
                        : per_call_.send(peer, channel, data, bytes));
  return int(ops_.size()) - 1;
}

int SplitP2P::recv(int peer, int channel, void *data, size_t bytes) {
  const bool reg = channel >= kRegions;
  ops_.emplace_back(reg,
                    reg ? regions_.recv(peer, channel - kRegions, data, bytes)
                        : per_call_.recv(peer, channel, data, bytes));
  return int(ops_.size()) - 1;
}

void SplitP2P::wait(int id) {
  const auto &op = ops_.at(size_t(id));
  if (op.first)
    regions_.wait(op.second);
  else
    per_call_.wait(op.second);
}

void SplitP2P::finish() {
  regions_.finish();
  per_call_.finish();
}

}  // namespace comm
}  // namespace hb
