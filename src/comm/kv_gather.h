// Every rank's string to every rank through the rendezvous KV in O(world)
// requests: each rank sets its key, rank 0 reads them all and publishes one
// concatenation, which every other rank reads once. Reading every peer's
// key instead costs world * (world - 1) round trips through the one store
// (32,512 at 128 ranks, seconds on one host; docs/scaling.md).
#pragma once

#include <cstdint>
#include <functional>
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

// What a rank reads back from kv_route: the string every rank reads and
// the one routed to it.
struct Routed {
  std::string common;
  std::string mine;
};

// Collective over the world, for exchanges whose every pair of ranks has
// its own small part (a TCP mesh's per-pair ports): each rank sets its
// value, rank 0 reads them all and route() (called on rank 0 only) turns
// them into one string for every rank and one per rank, which every rank
// reads. Each rank reads O(world) bytes, where kv_allgather of per-pair
// parts would hand each rank all world^2 of them. route fills each[q] for
// every q (each has world entries) and throws an hb error on a malformed
// value. Waits as kv_allgather's.
using RouteFn =
    std::function<void(const std::vector<std::string> &all, std::string &common,
                       std::vector<std::string> &each)>;
Routed kv_route(rdv::KV &kv, const std::string &prefix, int rank, int world,
                const std::string &value, int64_t timeout_ms,
                const RouteFn &route);

}  // namespace comm
}  // namespace hb
