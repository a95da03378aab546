// The Exchange (common/agreement.h) of a context, and a world of one.
#pragma once

#include <memory>

#include "common/agreement.h"
#include "hb.h"

namespace hb {
namespace comm {

// The exchange of a context (hb_alltoall / hb_alltoallv).
std::unique_ptr<Exchange> make_context_exchange(hb_context *ctx);
// A world of one (rank 0 of 1), for tables whose rows live on the ps tasks.
std::unique_ptr<Exchange> make_local_exchange();

}  // namespace comm
}  // namespace hb
