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

namespace gloo {
namespace transport {
class Context;
class Device;
}  // namespace transport
}  // namespace gloo

namespace hb {
namespace comm {

// A Gloo transport context whose TCP pairs connect safely (use it instead
// of dev->createContext(rank, size)); any other device's own context.
std::shared_ptr<gloo::transport::Context> make_tcp_context(
    const std::shared_ptr<gloo::transport::Device> &dev, int rank, int size);

}  // namespace comm
}  // namespace hb
