// P2P over two transports, chosen per peer: shared memory for the peers on
// this host, TCP (Gloo) for the others. This is per-pair transport
// selection under the same algorithms, so results keep their bits in any
// topology; it is not a two-level (intra-host, then inter-host) algorithm.
//
// Shared-memory operations only move while someone makes progress for
// them, so while this rank blocks on a TCP operation a helper thread keeps
// its shared-memory ones going (a peer may need them to make the progress
// this rank is waiting for).
#pragma once

#include <vector>

#include "comm/p2p.h"

namespace hb {
namespace comm {

class ShmTransport;
class ShmP2P;

class RoutedP2P final : public P2P {
 public:
  RoutedP2P(const ShmTransport &t, ShmP2P &shm, P2P &tcp);
  int rank() const override { return tcp_.rank(); }
  int world_size() const override { return tcp_.world_size(); }
  int send(int peer, int channel, const void *data, size_t bytes) override;
  int recv(int peer, int channel, void *data, size_t bytes) override;
  void wait(int id) override;
  void finish() override;

 private:
  void wait_tcp(int sub);  // with a helper pumping shared memory
  const ShmTransport &t_;
  ShmP2P &shm_;
  P2P &tcp_;
  std::vector<std::pair<bool, int>> ops_;  // (over shm, id there)
};

}  // namespace comm
}  // namespace hb
