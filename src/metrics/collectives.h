// The public entry points that metrics and hb_data_sync call on a context.
// They live in other modules (context, comm); the weak references let this
// module link and be unit-tested on its own (a NULL-context metric never
// calls them). With those modules linked in, these resolve normally.
#pragma once

#include "abi/error.h"
#include "hb.h"

#pragma weak hb_context_world_size
#pragma weak hb_allgather
#pragma weak hb_allgatherv
#pragma weak hb_allreduce

namespace hb {
namespace metrics {

// Throws HB_ERR_UNSUPPORTED when the collectives are not linked in.
inline void require_collectives() {
  if (!&hb_context_world_size || !&hb_allgather || !&hb_allgatherv || !&hb_allreduce)
    fail(HB_ERR_UNSUPPORTED, "this build of hb has no context / collectives module");
}

}  // namespace metrics
}  // namespace hb
