#include "metrics/exact_sum.h"

#include <cmath>

namespace hb {
namespace metrics {

void ExactSum::normalize() {
  for (int i = 0; i + 1 < kLimbs; ++i) {
    int64_t carry = limb_[i] >> 32;  // arithmetic shift: floor division
    limb_[i] -= carry * (int64_t(1) << 32);
    limb_[i + 1] += carry;
  }
  pending_ = 0;
}

void ExactSum::combine(const ExactSum &o, int64_t sign) {
  ExactSum other = o;
  other.normalize();
  normalize();
  for (int i = 0; i < kLimbs; ++i) limb_[i] += sign * other.limb_[i];
  pending_ = 1;
}

bool ExactSum::is_zero() const {
  ExactSum t = *this;
  t.normalize();
  for (int i = 0; i < kLimbs; ++i)
    if (t.limb_[i] != 0) return false;
  return true;
}

double ExactSum::to_double() const {
  ExactSum t = *this;
  t.normalize();
  bool negative = t.limb_[kLimbs - 1] < 0;
  if (negative) {
    // Two's complement over 32-bit digits: the magnitude in canonical form.
    for (int i = 0; i < kLimbs; ++i) t.limb_[i] = -t.limb_[i];
    t.normalize();
  }
  int top = kLimbs - 1;
  while (top >= 0 && t.limb_[top] == 0) --top;
  if (top < 0) return 0.0;
  // The top three digits carry 65+ significant bits: enough for a double,
  // and the value is a function of the exact sum only.
  long double r = 0.0L;
  int low = top >= 2 ? top - 2 : 0;
  for (int i = top; i >= low; --i)
    r = r * 4294967296.0L + static_cast<long double>(t.limb_[i]);
  double d = static_cast<double>(std::ldexp(r, 32 * low - kOnePosition));
  return negative ? -d : d;
}

void ExactSum::write(unsigned char *out) const {
  ExactSum t = *this;
  t.normalize();
  for (int i = 0; i < kLimbs; ++i) {
    uint64_t u = static_cast<uint64_t>(t.limb_[i]);
    for (int b = 0; b < 8; ++b)
      out[i * 8 + b] = static_cast<unsigned char>(u >> (8 * b));
  }
}

bool ExactSum::read(const unsigned char *in) {
  for (int i = 0; i < kLimbs; ++i) {
    uint64_t u = 0;
    for (int b = 0; b < 8; ++b)
      u |= static_cast<uint64_t>(in[i * 8 + b]) << (8 * b);
    limb_[i] = static_cast<int64_t>(u);
    if (i + 1 < kLimbs && (limb_[i] < 0 || limb_[i] > int64_t(0xffffffff)))
      return false;
  }
  // The top limb holds at most a few carry bits in any reachable state.
  if (limb_[kLimbs - 1] > (int64_t(1) << 40) ||
      limb_[kLimbs - 1] < -(int64_t(1) << 40))
    return false;
  pending_ = 0;
  return true;
}

}  // namespace metrics
}  // namespace hb
