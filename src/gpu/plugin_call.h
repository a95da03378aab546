// Calling into the CUDA plugin from the core: every plugin function returns
// an hb_status with a message in an error buffer; these turn that into an
// hb::Error naming what was attempted.
#pragma once

#include <cstddef>
#include <cstdint>

#include "abi/error.h"
#include "plugin_api.h"

namespace hb {
namespace gpu {

// Calls fn(args..., errbuf, errcap); throws hb::Error(status, "what: msg").
template <class Fn, class... Args>
void plugin_call(const char *what, Fn fn, Args... args) {
  char err[512] = {0};
  int32_t st = fn(args..., err, sizeof err);
  if (st != HB_OK) fail(st, "%s: %s", what, err);
}

// As plugin_call, but returns the status instead of throwing (for cleanup
// paths that must not throw); the message goes to *msg when not NULL.
template <class Fn, class... Args>
int32_t plugin_try(std::string *msg, Fn fn, Args... args) {
  char err[512] = {0};
  int32_t st = fn(args..., err, sizeof err);
  if (st != HB_OK && msg) *msg = err;
  return st;
}

}  // namespace gpu
}  // namespace hb

// Throws HB_ERR_UNSUPPORTED when plugin table t lacks member m (a plugin
// older than this core).
#define HB_GPU_REQUIRE_MEMBER(t, m)                                            \
  do {                                                                         \
    if (!HB_CUDA_PLUGIN_HAS(t, m))                                             \
      ::hb::fail(HB_ERR_UNSUPPORTED, "CUDA plugin is too old: it has no '%s'", \
                 #m);                                                          \
  } while (0)
