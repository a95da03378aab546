#include "abi/dtype.h"

#include "abi/error.h"

namespace hb {

size_t dtype_size_or_throw(hb_dtype dtype, const char *what) {
  size_t s = hb_dtype_size(dtype);
  if (s == 0) fail(HB_ERR_INVALID_ARGUMENT, "%s: unknown dtype %d", what, dtype);
  return s;
}

void check_reduce_op(hb_reduce_op op) {
  if (op < HB_SUM || op > HB_AVG)
    fail(HB_ERR_INVALID_ARGUMENT, "unknown reduce op %d", op);
}

const char *dtype_name(hb_dtype dtype) {
  switch (dtype) {
    case HB_FLOAT32: return "float32";
    case HB_FLOAT64: return "float64";
    case HB_FLOAT16: return "float16";
    case HB_BFLOAT16: return "bfloat16";
    case HB_INT32: return "int32";
    case HB_INT64: return "int64";
    case HB_UINT8: return "uint8";
  }
  return "unknown";
}

}  // namespace hb

extern "C" size_t hb_dtype_size(hb_dtype dtype) {
  switch (dtype) {
    case HB_FLOAT32: return 4;
    case HB_FLOAT64: return 8;
    case HB_FLOAT16: return 2;
    case HB_BFLOAT16: return 2;
    case HB_INT32: return 4;
    case HB_INT64: return 8;
    case HB_UINT8: return 1;
  }
  return 0;
}
