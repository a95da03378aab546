// A one-rank context through the public API, for the tests that link the
// shared libhb.so (gpu_api_test, gpu_embedding_test).
#pragma once

#include "hb.h"

namespace hbtest {

struct ApiContext {
  ApiContext() {
    hb_context_options o = HB_CONTEXT_OPTIONS_INIT;
    o.rank = 0;
    o.world_size = 1;
    o.options = "timeout_ms=60000";
    status = hb_context_create(&o, &ctx);
  }
  ~ApiContext() { hb_context_destroy(ctx); }
  ApiContext(const ApiContext &) = delete;
  ApiContext &operator=(const ApiContext &) = delete;
  hb_context *ctx = nullptr;
  hb_status status;
};

}  // namespace hbtest
