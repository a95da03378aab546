// Point-to-point messages between the ranks of a backend: what hb's own
// collective algorithms (comm/rank_order.h) are written against, so an
// algorithm never sees the transport (Gloo's TCP pairs today; a same-host
// shared-memory transport would implement this too).
//
// A P2P object serves one collective call. Operations are posted without
// blocking and complete in the background; between two ranks, the sends
// and receives of one channel match in posting order (the k-th send from a
// to b on channel c fills b's k-th receive from a on c, with the same byte
// count). A posted buffer must stay valid until its operation completed.
#pragma once

#include <cstddef>

namespace hb {
namespace comm {

class P2P {
 public:
  virtual ~P2P() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Post a send / receive of `bytes` (> 0) bytes; returns the operation's id.
  virtual int send(int peer, int channel, const void *data, size_t bytes) = 0;
  virtual int recv(int peer, int channel, void *data, size_t bytes) = 0;
  // Waits (bounded by the transport's timeout) until operation id is
  // complete; throws when it cannot be (peer lost, timeout).
  virtual void wait(int id) = 0;
  // Waits for every operation not waited for yet.
  virtual void finish() = 0;
};

}  // namespace comm
}  // namespace hb
