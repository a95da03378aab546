// Descriptors for many peers: a full TCP mesh holds 2(N-1) sockets per rank
// and the rendezvous server one per rank, past the usual soft limit of 1024
// long before 1024 ranks (docs/scaling.md).
#pragma once

#include <cstddef>

namespace hb {

// Raises RLIMIT_NOFILE's soft limit towards `wanted` descriptors (never
// above the hard limit, never lowering it); logs once at info level when it
// raised it and at warn level when the hard limit is too low. Returns the
// soft limit in force afterwards.
size_t raise_fd_limit(size_t wanted);

}  // namespace hb
