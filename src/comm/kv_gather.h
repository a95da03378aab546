// Every rank's string to every rank through the rendezvous KV in O(world)
// requests: each rank sets its key, rank 0 reads them all and publishes one
// concatenation, which every other rank reads once. Reading every peer's
// key instead costs world * (world - 1) round trips through the one store
// (32,512 at 128 ranks, seconds on one host; docs/scaling.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hb {
namespace rdv {
class KV;
}
namespace comm {

// Collective over the world (same prefix on every rank, used once): the
// values of ranks 0..world-1, rank's own included. Each wait is bounded by
// timeout_ms (HB_ERR_TIMEOUT naming the key) and ends early when the
// context fails (the KV's calls do).
std::vector<std::string> kv_allgather(rdv::KV &kv, const std::string &prefix,
                                      int rank, int world,
                                      const std::string &value,
                                      int64_t timeout_ms);

}  // namespace comm
}  // namespace hb
