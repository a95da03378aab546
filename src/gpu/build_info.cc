// hb_version_number and hb_build_info. Here, not in abi/ (which gpu/ is
// built on), because the build info reports the CUDA plugin (gpu.h).
#include <mutex>
#include <string>

#include "gpu/gpu.h"
#include "hb.h"

#ifndef HB_BUILD_TYPE
#define HB_BUILD_TYPE "unknown"
#endif

extern "C" unsigned hb_version_number(void) { return HB_VERSION_NUMBER; }

extern "C" const char *hb_build_info(void) {
  // Built once: loading the plugin to report on it is the expensive part.
  static std::once_flag once;
  static std::string info;
  std::call_once(once, [] {
    try {
      info = "hb " + std::to_string(HB_VERSION_MAJOR) + "." +
             std::to_string(HB_VERSION_MINOR) + "." +
             std::to_string(HB_VERSION_PATCH) + "; build=" HB_BUILD_TYPE
             "; cpu_backend=gloo; " + hb::gpu::describe();
    } catch (...) {
      info = "hb (build info unavailable: out of memory)";
    }
  });
  return info.c_str();
}
