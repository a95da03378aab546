// ExactSum: an exact accumulator for float32 values (a small fixed-point
// "superaccumulator"). Every float32 is m * 2^(p - 149) with a 24-bit integer
// m and 0 <= p <= 253, so the whole float range fits a 342-bit fixed-point
// number with room for 2^64 additions. Sums are therefore associative: the
// result depends only on the multiset of values added, never on their order
// or on how they were split across ranks, which is what makes merged metric
// states bit-identical to single-process ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hb {
namespace metrics {

class ExactSum {
 public:
  // 32-bit digits in 64-bit limbs: the spare bits absorb carries, so an add
  // touches two limbs and never propagates.
  static constexpr int kLimbs = 12;

  // Adds a finite float32 (callers validate finiteness).
  void add(float x) {
    uint32_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    uint32_t e = (bits >> 23) & 0xffu;
    uint64_t m = e ? ((bits & 0x7fffffu) | 0x800000u) : (bits & 0x7fffffu);
    int p = e ? static_cast<int>(e) - 1 : 0;
    add_scaled(m, p, (bits >> 31) != 0);
  }

  // Adds n * 1.0 exactly.
  void add_count(uint64_t n) {
    add_scaled(n & 0xffffffffu, kOnePosition, false);
    add_scaled(n >> 32, kOnePosition + 32, false);
  }

  // Adds / subtracts another sum (both are normalized first, so the limbs
  // cannot overflow).
  void add(const ExactSum &o) { combine(o, 1); }
  void subtract(const ExactSum &o) { combine(o, -1); }

  bool is_zero() const;
  // Nearest-ish double of the exact value; a pure function of the value.
  double to_double() const;

  // Canonical form: limbs 0..kLimbs-2 in [0, 2^32), the top limb signed.
  void normalize();
  // Serialized size and layout: kLimbs little-endian int64 (normalized).
  static constexpr size_t kWireBytes = kLimbs * 8;
  void write(unsigned char *out) const;
  // Returns false if the limbs are not in canonical form.
  bool read(const unsigned char *in);

 private:
  static constexpr int kOnePosition = 149;  // 1.0 = 1 * 2^(149 - 149)
  static constexpr uint64_t kNormalizeEvery = uint64_t(1) << 29;

  void combine(const ExactSum &o, int64_t sign);

  // Adds (or subtracts) m * 2^(p - 149), m < 2^33.
  void add_scaled(uint64_t m, int p, bool negative) {
    uint64_t v = m << (p & 31);  // < 2^64
    int k = p >> 5;
    int64_t lo = static_cast<int64_t>(v & 0xffffffffu);
    int64_t hi = static_cast<int64_t>(v >> 32);
    if (negative) {
      lo = -lo;
      hi = -hi;
    }
    limb_[k] += lo;
    limb_[k + 1] += hi;
    if (++pending_ >= kNormalizeEvery) normalize();
  }

  int64_t limb_[kLimbs] = {};
  uint64_t pending_ = 0;  // adds since the last normalize
};

}  // namespace metrics
}  // namespace hb
