#include "hb.h"

extern "C" const char *hb_status_name(hb_status status) {
  switch (status) {
    case HB_OK: return "HB_OK";
    case HB_ERR_INVALID_ARGUMENT: return "HB_ERR_INVALID_ARGUMENT";
    case HB_ERR_CONFIG: return "HB_ERR_CONFIG";
    case HB_ERR_TIMEOUT: return "HB_ERR_TIMEOUT";
    case HB_ERR_PEER_FAILED: return "HB_ERR_PEER_FAILED";
    case HB_ERR_ABORTED: return "HB_ERR_ABORTED";
    case HB_ERR_IO: return "HB_ERR_IO";
    case HB_ERR_OUT_OF_MEMORY: return "HB_ERR_OUT_OF_MEMORY";
    case HB_ERR_UNSUPPORTED: return "HB_ERR_UNSUPPORTED";
    case HB_ERR_DEVICE: return "HB_ERR_DEVICE";
    case HB_ERR_PERMISSION: return "HB_ERR_PERMISSION";
    case HB_ERR_CORRUPT: return "HB_ERR_CORRUPT";
    case HB_ERR_INTERNAL: return "HB_ERR_INTERNAL";
    case HB_ERR_MISMATCH: return "HB_ERR_MISMATCH";
  }
  return "HB_ERR_UNKNOWN";
}
