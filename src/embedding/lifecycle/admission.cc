#include "embedding/lifecycle/admission.h"

#include <algorithm>

#include "embedding/init_math.h"

namespace hb {
namespace lifecycle {

namespace {

// Double hashing: the i-th cell of id is (h1 + i * h2) mod m, h2 odd.
inline uint64_t h1_of(int64_t id) {
  return initmath::splitmix64(static_cast<uint64_t>(id) ^ 0xB10011ull);
}
inline uint64_t h2_of(uint64_t h1) {
  return initmath::splitmix64(h1 ^ 0x5EED5EEDull) | 1;
}

}  // namespace

Admission::Admission(const Policy &p, int world)
    : on_(p.counts()),
      kind_(p.admission),
      min_count_(static_cast<uint32_t>(p.min_count)),
      ttl_(static_cast<uint64_t>(p.ttl_steps)) {
  if (on_ && kind_ == Admit::kBloom) {
    hashes_ = p.bloom_hashes;
    int64_t per_rank = std::max<int64_t>(64, p.bloom_bytes / world);
    cells_.assign(static_cast<size_t>(per_rank), 0);
  }
}

void Admission::count(int64_t id, uint64_t step) {
  if (kind_ == Admit::kBloom) {
    const uint64_t m = cells_.size(), a = h1_of(id), b = h2_of(a);
    for (int i = 0; i < hashes_; ++i) {
      uint8_t &c = cells_[(a + i * b) % m];
      if (c != 255) ++c;
    }
    return;
  }
  Slot &s = slot_of(id);
  if (s.count != UINT32_MAX) ++s.count;
  s.last_seen = step;
  if (ttl_) sightings_.emplace_back(step, id);
}

Admission::Slot &Admission::slot_of(int64_t id) {
  bool inserted;
  uint32_t slot =
      free_.empty() ? static_cast<uint32_t>(slots_.size()) : free_.back();
  uint32_t got = map_.insert(id, slot, &inserted);
  if (inserted) {
    if (slot == slots_.size())
      slots_.push_back(Slot{0, 0});
    else
      free_.pop_back();
    slots_[got] = Slot{0, 0};
  }
  return slots_[got];
}

uint32_t Admission::bloom_count(int64_t id) const {
  const uint64_t m = cells_.size(), a = h1_of(id), b = h2_of(a);
  uint32_t least = 255;
  for (int i = 0; i < hashes_; ++i)
    least = std::min<uint32_t>(least, cells_[(a + i * b) % m]);
  return least;
}

bool Admission::admitted(int64_t id) const {
  if (!on_) return true;
  if (kind_ == Admit::kBloom) return bloom_count(id) >= min_count_;
  uint32_t slot = map_.find(id);
  return slot != emb::IdMap::kEmpty && slots_[slot].count >= min_count_;
}

void Admission::forget(int64_t id) {
  if (!on_ || kind_ == Admit::kBloom) return;
  uint32_t slot = map_.erase(id);
  if (slot != emb::IdMap::kEmpty) free_.push_back(slot);
}

void Admission::expire(uint64_t step) {
  if (!on_ || kind_ == Admit::kBloom || ttl_ == 0) return;
  while (!sightings_.empty() && step - sightings_.front().first >= ttl_) {
    const int64_t id = sightings_.front().second;
    sightings_.pop_front();
    uint32_t slot = map_.find(id);
    if (slot != emb::IdMap::kEmpty && step - slots_[slot].last_seen >= ttl_)
      forget(id);
  }
}

void Admission::restore(const Counter &c) {
  slot_of(c.id) = Slot{c.count, c.last_seen};
  if (ttl_) sightings_.emplace_back(c.last_seen, c.id);
}

void Admission::restored() {
  // Sightings must be in step order for expire().
  std::stable_sort(
      sightings_.begin(), sightings_.end(),
      [](const std::pair<uint64_t, int64_t> &a,
         const std::pair<uint64_t, int64_t> &b) { return a.first < b.first; });
}

void Admission::clear() {
  map_.reset(0);
  slots_.clear();
  free_.clear();
  sightings_.clear();
  std::fill(cells_.begin(), cells_.end(), 0);
}

size_t Admission::memory_bytes() const {
  return map_.memory_bytes() + slots_.capacity() * sizeof(Slot) +
         free_.capacity() * 4 + cells_.capacity() + sightings_.size() * 16;
}

}  // namespace lifecycle
}  // namespace hb
