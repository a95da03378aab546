// Gloo's TCP pair, made safe to connect while a peer dies.
//
// Gloo (this version) finishes a connection in its event-loop thread: the
// listening side accepts, the connecting side reads SO_ERROR, and both then
// call getpeername through GLOO_ENFORCE. A peer killed at that moment has
// already reset the socket, getpeername fails with ENOTCONN, the enforce
// throws in the loop thread, outside any hb call, and std::terminate aborts
// the surviving process. This pair finishes the connection itself and turns
// every such failure (and any other exception in the loop thread) into an
// error on the pair, which wakes the connect waiting for it; the rendezvous
// then names the lost rank as for any other peer failure.
#pragma once

#include <memory>
#include <vector>

namespace gloo {
namespace transport {
class Context;
class Device;
class Pair;
}  // namespace transport
}  // namespace gloo

namespace hb {
namespace comm {

// A Gloo transport context whose TCP pairs connect safely (use it instead
// of dev->createContext(rank, size)); any other device's own context.
std::shared_ptr<gloo::transport::Context> make_tcp_context(
    const std::shared_ptr<gloo::transport::Device> &dev, int rank, int size);

// Pair::connect in two halves, so that a rank dials all its peers before
// it waits for any: start_connect records the peer's address and, on the
// side that dials, starts a non-blocking connect; wait_connected waits
// (the pair's timeout) until the pair is connected or failed. Pairs of
// another transport connect (and wait) in start_connect.
void start_connect(gloo::transport::Pair &pair, const std::vector<char> &peer);
void wait_connected(gloo::transport::Pair &pair);

}  // namespace comm
}  // namespace hb
