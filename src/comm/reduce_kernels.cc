#include "comm/reduce_kernels.h"

#include <cmath>
#include <cstring>
#include <type_traits>

#include "abi/dtype.h"
#include "abi/error.h"

namespace hb {
namespace comm {
namespace {

// Integer sums and products wrap (two's complement) instead of being UB.
template <class T>
inline T wrap_add(T a, T b) {
  if constexpr (std::is_integral<T>::value) {
    using U = typename std::make_unsigned<T>::type;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <class T>
inline T wrap_mul(T a, T b) {
  if constexpr (std::is_integral<T>::value) {
    using U = typename std::make_unsigned<T>::type;
    // uint8 promotes to int: multiply as unsigned 32 bits.
    using W = typename std::conditional<(sizeof(U) < 4), uint32_t, U>::type;
    return static_cast<T>(static_cast<W>(static_cast<U>(a)) *
                          static_cast<W>(static_cast<U>(b)));
  } else {
    return a * b;
  }
}

// out = op(a, b) where out may be exactly a or b: the in-place kernels
// then, with the operands swapped if needed (op is commutative).
template <class T, void (*In)(T *, const T *, size_t),
          void (*Out)(T *__restrict, const T *__restrict, const T *__restrict,
                      size_t)>
void combine_v(void *out, const void *a, const void *b, size_t n) {
  T *o = static_cast<T *>(out);
  const T *x = static_cast<const T *>(a), *y = static_cast<const T *>(b);
  if (o == x)
    In(o, y, n);
  else if (o == y)
    In(o, x, n);
  else
    Out(o, x, y, n);
}

// The in-place kernel behind a ReduceFn.
template <class T, void (*In)(T *, const T *, size_t)>
void acc_v(void *acc, const void *in, size_t n) {
  In(static_cast<T *>(acc), static_cast<const T *>(in), n);
}

template <class T>
OpKernels typed_kernels(hb_reduce_op op) {
  using K = Kernels<T>;
  switch (op) {
    case HB_SUM:
    case HB_AVG:
      return {&acc_v<T, &K::sum>, &combine_v<T, &K::sum, &K::sum3>};
    case HB_PROD:
      return {&acc_v<T, &K::prod>, &combine_v<T, &K::prod, &K::prod3>};
    case HB_MIN:
      return {&acc_v<T, &K::min>, &combine_v<T, &K::min, &K::min3>};
    case HB_MAX:
      return {&acc_v<T, &K::max>, &combine_v<T, &K::max, &K::max3>};
  }
  fail(HB_ERR_INVALID_ARGUMENT, "unknown reduce op %d", op);
}

template <class T>
void divide(T *p, size_t n, int world) {
  if constexpr (std::is_integral<T>::value) {
    const T w = static_cast<T>(world);
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] / w);
  } else {
    const T w = static_cast<T>(world);
    for (size_t i = 0; i < n; ++i) p[i] = p[i] / w;
  }
}

}  // namespace

template <class T>
void Kernels<T>::sum(T *x, const T *y, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = wrap_add(x[i], y[i]);
}
template <class T>
void Kernels<T>::prod(T *x, const T *y, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = wrap_mul(x[i], y[i]);
}
// min and max must not depend on the operand order (which rank owns a chunk
// decides it): NaN wins, and of two equal zeros -0 is the min, +0 the max.
template <class T>
inline T sym_min(T a, T b) {
  if constexpr (std::is_floating_point<T>::value) {
    if (a < b) return a;
    if (b < a) return b;
    if (a != a) return a;
    if (b != b) return b;
    return std::signbit(a) ? a : b;
  } else {
    return a < b ? a : b;
  }
}
template <class T>
inline T sym_max(T a, T b) {
  if constexpr (std::is_floating_point<T>::value) {
    if (a > b) return a;
    if (b > a) return b;
    if (a != a) return a;
    if (b != b) return b;
    return std::signbit(a) ? b : a;
  } else {
    return a > b ? a : b;
  }
}

template <class T>
void Kernels<T>::min(T *x, const T *y, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = sym_min(x[i], y[i]);
}
template <class T>
void Kernels<T>::max(T *x, const T *y, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = sym_max(x[i], y[i]);
}

template <class T>
void Kernels<T>::sum3(T *__restrict out, const T *__restrict a,
                      const T *__restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = wrap_add(a[i], b[i]);
}
template <class T>
void Kernels<T>::prod3(T *__restrict out, const T *__restrict a,
                       const T *__restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = wrap_mul(a[i], b[i]);
}
template <class T>
void Kernels<T>::min3(T *__restrict out, const T *__restrict a,
                      const T *__restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = sym_min(a[i], b[i]);
}
template <class T>
void Kernels<T>::max3(T *__restrict out, const T *__restrict a,
                      const T *__restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = sym_max(a[i], b[i]);
}

template struct Kernels<float>;
template struct Kernels<double>;
template struct Kernels<int32_t>;
template struct Kernels<int64_t>;
template struct Kernels<uint8_t>;

hb_dtype wire_dtype(hb_dtype dtype, hb_reduce_op op) {
  if (dtype == HB_FLOAT16 || dtype == HB_BFLOAT16) return HB_FLOAT32;
  if (op == HB_AVG && dtype == HB_UINT8) return HB_INT32;
  if (op == HB_AVG && dtype == HB_INT32) return HB_INT64;
  return dtype;
}

namespace {
template <class From, class To>
void widen(const void *in, void *out, size_t n) {
  const From *s = static_cast<const From *>(in);
  To *d = static_cast<To *>(out);
  for (size_t i = 0; i < n; ++i) d[i] = static_cast<To>(s[i]);
}
template <class From, class To>
void narrow_avg(const void *in, void *out, size_t n, int world) {
  const From *s = static_cast<const From *>(in);
  To *d = static_cast<To *>(out);
  const From w = static_cast<From>(world);
  for (size_t i = 0; i < n; ++i) d[i] = static_cast<To>(s[i] / w);
}
}  // namespace

void pack(const void *in, hb_dtype dtype, hb_reduce_op op, void *out,
          size_t n) {
  hb_dtype wire = wire_dtype(dtype, op);
  if (wire != dtype && dtype == HB_UINT8)
    return widen<uint8_t, int32_t>(in, out, n);
  if (wire != dtype && dtype == HB_INT32)
    return widen<int32_t, int64_t>(in, out, n);
  if (dtype == HB_FLOAT16 || dtype == HB_BFLOAT16) {
    const uint16_t *s = static_cast<const uint16_t *>(in);
    float *d = static_cast<float *>(out);
    if (dtype == HB_FLOAT16)
      for (size_t i = 0; i < n; ++i) d[i] = half_to_float(s[i]);
    else
      for (size_t i = 0; i < n; ++i) d[i] = bf16_to_float(s[i]);
    return;
  }
  if (in != out && n) std::memcpy(out, in, n * hb_dtype_size(dtype));
}

void unpack(const void *in, hb_dtype dtype, hb_reduce_op op, int world,
            void *out, size_t n) {
  const bool avg = op == HB_AVG && world > 1;
  hb_dtype wire = wire_dtype(dtype, op);
  if (wire != dtype && dtype == HB_UINT8)
    return narrow_avg<int32_t, uint8_t>(in, out, n, world);
  if (wire != dtype && dtype == HB_INT32)
    return narrow_avg<int64_t, int32_t>(in, out, n, world);
  if (dtype == HB_FLOAT16 || dtype == HB_BFLOAT16) {
    const float *s = static_cast<const float *>(in);
    uint16_t *d = static_cast<uint16_t *>(out);
    const float w = static_cast<float>(world);
    for (size_t i = 0; i < n; ++i) {
      float v = avg ? s[i] / w : s[i];
      d[i] = dtype == HB_FLOAT16 ? float_to_half(v) : float_to_bf16(v);
    }
    return;
  }
  if (in != out && n) std::memcpy(out, in, n * hb_dtype_size(dtype));
  if (!avg) return;
  switch (dtype) {
    case HB_FLOAT32:
      divide(static_cast<float *>(out), n, world);
      break;
    case HB_FLOAT64:
      divide(static_cast<double *>(out), n, world);
      break;
    case HB_INT32:
      divide(static_cast<int32_t *>(out), n, world);
      break;
    case HB_INT64:
      divide(static_cast<int64_t *>(out), n, world);
      break;
    case HB_UINT8:
      divide(static_cast<uint8_t *>(out), n, world);
      break;
    default:
      fail(HB_ERR_INTERNAL, "unpack: dtype %d", dtype);
  }
}

OpKernels op_kernels(hb_dtype wire, hb_reduce_op op) {
  switch (wire) {
    case HB_FLOAT32:
      return typed_kernels<float>(op);
    case HB_FLOAT64:
      return typed_kernels<double>(op);
    case HB_INT32:
      return typed_kernels<int32_t>(op);
    case HB_INT64:
      return typed_kernels<int64_t>(op);
    case HB_UINT8:
      return typed_kernels<uint8_t>(op);
  }
  fail(HB_ERR_INTERNAL, "op_kernels: no wire type %d", wire);
}

}  // namespace comm
}  // namespace hb
