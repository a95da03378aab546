// A ps task's server: one thread, one poll loop over the workers'
// connections (hb_context_serve runs it). Each table is an ordinary
// embedding Shard (shard `ps_index` of `num_ps`, ids owned by id mod
// num_ps) with a staleness clock (clock.h); dense buffers are tables too.
//
// Requests are served in arrival order. A pull or push whose rank runs past
// the staleness bound is parked and served as soon as the slowest worker
// catches up, or is lost. Staleness 0: a round's pushes are kept until
// every active rank pushed, then summed in rank order and applied in one
// optimizer step (the owner side of a collective step, bit for bit); k > 0:
// each push is applied when it arrives.
//
// Liveness: a worker is lost when its connection closes or it is silent
// (no request, no ping) past peer_timeout_ms; its parked request stays
// parked, and a lost worker that speaks again (a SIGSTOPped one, resumed)
// or reconnects (restarted) rejoins. Serving ends when every worker said
// BYE (HB_OK), or when no worker has been alive for connect_timeout_ms
// after some were lost (HB_ERR_PEER_FAILED: none was restarted), or none
// came within connect_timeout_ms (HB_ERR_TIMEOUT).
#pragma once

#include <cstdint>
#include <string>

namespace hb {
class Health;
namespace ps {

struct ServerConfig {
  std::string host = "0.0.0.0";  // listen address
  int port = 0;
  int ps_index = 0, num_ps = 1;
  int64_t staleness = 0;
  // staleness bounds the age of a push's rows (table versions) instead of
  // how many steps a worker leads the slowest (docs/parameter-servers.md).
  bool age_bound = false;
  int64_t peer_timeout_ms = 5000;
  int64_t connect_timeout_ms = 60000;
  // A request parked at the staleness gate gets HB_ERR_TIMEOUT, naming the
  // table, the step and the worker it waited for, after this long.
  int64_t timeout_ms = 300000;
  size_t max_frame_bytes = 64u << 20;
  // Dynamic splits (split_queue.h), on ps task 0 when split_samples > 0.
  int64_t split_samples = 0, split_size = 1024, split_epochs = 1;
  uint64_t split_seed = 0;
};

// Serves until the job ends (see above); throws its status. `health`: an
// abort of the ps's context stops it (HB_ERR_ABORTED).
void serve(const ServerConfig &cfg, Health &health);

}  // namespace ps
}  // namespace hb
