#include "ps/split_queue.h"

#include <algorithm>
#include <cstring>

#include "abi/error.h"
#include "common/bytes.h"

namespace hb {
namespace ps {
namespace {

constexpr char kMagic[8] = {'H', 'B', 'S', 'P', 'L', 'I', 'T', '1'};

uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

SplitQueue::SplitQueue(int64_t samples, int64_t split_size, int64_t epochs,
                       uint64_t seed, int world)
    : samples_(samples),
      split_size_(split_size),
      epochs_(epochs),
      per_epoch_(0),
      seed_(seed),
      held_(world > 0 ? world : 0) {
  if (samples < 1 || split_size < 1 || epochs < 1 || world < 1)
    fail(HB_ERR_INVALID_ARGUMENT,
         "split queue: samples %lld, split_size %lld, epochs %lld, world %d "
         "(each must be at least 1)",
         static_cast<long long>(samples), static_cast<long long>(split_size),
         static_cast<long long>(epochs), world);
  per_epoch_ = (samples + split_size - 1) / split_size;
  epoch_ = -1;
  refill();
}

void SplitQueue::refill() {
  if (epoch_ + 1 >= epochs_) {
    epoch_ = epochs_;  // nothing more to hand out
    order_.clear();
    next_ = 0;
    return;
  }
  ++epoch_;
  order_.resize(per_epoch_);
  for (int64_t i = 0; i < per_epoch_; ++i) order_[i] = i;
  // Fisher-Yates from (seed, epoch): reproducible, and independent of who
  // asked when.
  uint64_t s =
      seed_ ^ (0xD1B54A32D192ED03ull * static_cast<uint64_t>(epoch_ + 1));
  for (int64_t i = per_epoch_ - 1; i > 0; --i)
    std::swap(order_[i], order_[splitmix(&s) % static_cast<uint64_t>(i + 1)]);
  next_ = 0;
}

SplitLease SplitQueue::lease(const Held &h) const {
  SplitLease l;
  l.split = h.split;
  l.epoch = h.epoch;
  l.begin = h.split * split_size_;
  l.end = std::min(samples_, l.begin + split_size_);
  l.from = h.offset;
  return l;
}

SplitLease SplitQueue::next(int rank) {
  if (rank < 0 || rank >= static_cast<int>(held_.size()))
    fail(HB_ERR_INVALID_ARGUMENT, "split queue: rank %d of %zu", rank,
         held_.size());
  Held &h = held_[rank];
  if (h.split >= 0) return lease(h);  // its own, unfinished (a restart)
  if (!returned_.empty()) {
    h = returned_.front();
    returned_.pop_front();
    return lease(h);
  }
  if (next_ >= order_.size()) refill();
  if (next_ >= order_.size()) {
    // All handed out. A split still held may yet come back (its holder lost
    // for good): whoever is left must be there to finish it.
    SplitLease l;
    for (const Held &o : held_)
      if (o.split >= 0) l.split = SplitLease::kWait;
    return l;
  }
  h.split = order_[next_++];
  h.epoch = epoch_;
  h.offset = h.split * split_size_;
  return lease(h);
}

void SplitQueue::commit(int rank, int64_t split, int64_t offset) {
  if (rank < 0 || rank >= static_cast<int>(held_.size()) ||
      held_[rank].split != split || split < 0)
    fail(HB_ERR_INVALID_ARGUMENT,
         "split queue: rank %d commits split %lld, which it does not hold",
         rank, static_cast<long long>(split));
  SplitLease l = lease(held_[rank]);
  if (offset < l.begin || offset > l.end)
    fail(HB_ERR_INVALID_ARGUMENT,
         "split queue: rank %d commits offset %lld outside split %lld "
         "[%lld, %lld)",
         rank, static_cast<long long>(offset), static_cast<long long>(split),
         static_cast<long long>(l.begin), static_cast<long long>(l.end));
  held_[rank].offset = std::max(held_[rank].offset, offset);
}

void SplitQueue::done(int rank, int64_t split) {
  commit(rank, split, lease(held_[rank]).end);
  held_[rank] = Held();
  ++done_count_;
}

SplitLease SplitQueue::give_back(int rank) {
  if (rank < 0 || rank >= static_cast<int>(held_.size())) return SplitLease();
  Held &h = held_[rank];
  if (h.split < 0) return SplitLease();
  const SplitLease l = lease(h);
  // A split whose last sample was committed is finished, not handed out.
  if (h.offset >= l.end)
    ++done_count_;
  else
    returned_.push_back(h);
  h = Held();
  return l.from < l.end ? l : SplitLease();
}

SplitProgress SplitQueue::progress() const {
  SplitProgress p;
  p.epoch = epoch_, p.epochs = epochs_, p.splits_per_epoch = per_epoch_;
  p.splits_done = done_count_, p.samples_total = samples_ * epochs_;
  // Handed out: every earlier epoch, and this one's order up to next_.
  int64_t handed = std::min(epoch_, epochs_) * samples_;
  for (size_t i = 0; i < next_ && i < order_.size(); ++i) {
    Held h;
    h.split = order_[i];
    const SplitLease l = lease(h);
    handed += l.end - l.begin;
  }
  for (const Held &h : returned_) p.open.push_back(lease(h));
  for (const Held &h : held_)
    if (h.split >= 0) p.open.push_back(lease(h));
  for (const SplitLease &l : p.open) handed -= l.end - l.from;
  p.samples_done = handed;
  return p;
}

std::string SplitQueue::file_name(uint64_t nonce) {
  return format("split_queue.%016llx", static_cast<unsigned long long>(nonce));
}

std::string SplitQueue::save() const {
  using hb::put;
  std::string s(kMagic, 8);
  put<int64_t>(&s, samples_);
  put<int64_t>(&s, split_size_);
  put<int64_t>(&s, epochs_);
  put<uint64_t>(&s, seed_);
  put<int64_t>(&s, epoch_);
  put<uint64_t>(&s, next_);
  put<int64_t>(&s, done_count_);
  std::vector<Held> open(returned_.begin(), returned_.end());
  for (const Held &h : held_)
    if (h.split >= 0) open.push_back(h);
  put<uint64_t>(&s, open.size());
  for (const Held &h : open) {
    put<int64_t>(&s, h.split);
    put<int64_t>(&s, h.epoch);
    put<int64_t>(&s, h.offset);
  }
  return s;
}

SplitQueue SplitQueue::load(const std::string &bytes, int world) {
  ByteReader c(bytes, "split queue");
  if (std::memcmp(c.take(8, "magic"), kMagic, 8) != 0)
    fail(HB_ERR_CORRUPT, "split queue: not a saved split queue");
  const int64_t samples = c.get<int64_t>("samples");
  const int64_t split_size = c.get<int64_t>("split size");
  const int64_t epochs = c.get<int64_t>("epochs");
  const uint64_t seed = c.get<uint64_t>("seed");
  SplitQueue q(samples, split_size, epochs, seed, world);
  const int64_t epoch = c.get<int64_t>("epoch");
  const uint64_t next = c.get<uint64_t>("next");
  q.done_count_ = c.get<int64_t>("done");
  if (epoch < 0 || epoch > epochs || next > static_cast<uint64_t>(q.per_epoch_))
    fail(HB_ERR_CORRUPT, "split queue: epoch %lld, next %llu",
         static_cast<long long>(epoch), static_cast<unsigned long long>(next));
  while (q.epoch_ < epoch) q.refill();  // the same seeded order
  q.next_ = static_cast<size_t>(next);
  const uint64_t n = c.get<uint64_t>("open splits");
  for (uint64_t i = 0; i < n; ++i) {
    Held h;
    h.split = c.get<int64_t>("split");
    h.epoch = c.get<int64_t>("split epoch");
    h.offset = c.get<int64_t>("offset");
    if (h.split < 0 || h.split >= q.per_epoch_)
      fail(HB_ERR_CORRUPT, "split queue: split %lld of %lld",
           static_cast<long long>(h.split),
           static_cast<long long>(q.per_epoch_));
    q.returned_.push_back(h);  // resumed by whoever asks first
  }
  if (c.left() != 0)
    fail(HB_ERR_CORRUPT, "split queue: %zu bytes after the end", c.left());
  return q;
}

}  // namespace ps
}  // namespace hb
