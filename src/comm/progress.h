// A context's asynchronous CPU exchange (docs/embedding-collections.md,
// "Pipelined lookup"): a communicator of its own -- a second CPU Backend,
// bootstrapped under its own rendezvous prefix, so its rounds never share
// a call board, ring or TCP pair with the context's collectives -- and one
// progress thread that runs the posted jobs in order.
//
// Why a second communicator and not non-blocking calls on the context's:
// every CPU transport (shared-memory call board, routed and region p2p,
// Gloo pairs) is built around one call at a time per communicator, with
// per-call sequence numbers and fingerprints. Two independent channels keep
// them untouched: the caller's collectives (the dense allreduce) run on the
// context's communicator while a job's rounds run on this one.
//
// The thread sleeps on a condition variable while nothing is posted (it
// never spins: on a host with fewer cores than ranks a spinning helper
// would take the core the caller computes on). A job's own waits are the
// backend's (spin briefly, then the futex; bounded by timeout_ms; a lost
// peer fails the context's Health, which breaks them).
#pragma once

#include <memory>

#include "common/agreement.h"
#include "hb.h"

namespace hb {
namespace comm {

class Progress;

// The exchange of ctx's progress channel: alltoall / alltoallv run on the
// channel's communicator; post() runs a job on the progress thread;
// settle() waits (bounded) for every posted job. A call made off the
// progress thread settles first, so rounds never interleave. Collective:
// the channel is created by the first call on every rank (world > 1).
std::unique_ptr<Exchange> make_progress_exchange(hb_context *ctx);

}  // namespace comm
}  // namespace hb
