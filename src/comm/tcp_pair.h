// Gloo's TCP pair, made safe to connect while a peer dies, and connected
// through one listener per rank (comm/mesh_listener.h).
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
//
// Gloo's pair also listens on a port of its own from its constructor: a
// full mesh bound 2(N-1) ports per rank (8,064 on one host at 64 ranks).
// These pairs close that socket at once (its port is never published) and
// are connected instead by a dial to the peer's one listener, which reads
// the mesh hello below and hands the accepted socket to its pair.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <string>

namespace gloo {
namespace transport {
class Context;
class Device;
class Pair;
class UnboundBuffer;
}  // namespace transport
}  // namespace gloo

namespace hb {
namespace comm {

// A Gloo transport context whose pairs are hb's TCP pairs and whose
// unbound buffers can be aborted with abort_wait (use it instead of
// dev->createContext(rank, size)); dev must be a TCP device.
std::shared_ptr<gloo::transport::Context> make_tcp_context(
    const std::shared_ptr<gloo::transport::Device> &dev, int rank, int size);

// The mesh hello: what a dialling rank sends first on its connection to a
// peer's listener, and the one byte the listener answers. The nonce is
// the one the listening rank published in this world's bootstrap, so a
// stranger or a rank of an earlier world (a stale address) is refused.
struct MeshHello {
  uint32_t world = 0;    // world size
  uint32_t rank = 0;     // the dialling rank
  uint32_t context = 0;  // which of the formation's contexts
  uint64_t nonce = 0;    // the listening rank's
};
constexpr size_t kHelloBytes = 24;
std::string encode_hello(const MeshHello &h);
// False if bytes (kHelloBytes) do not start with the hello's magic.
bool decode_hello(const char *bytes, MeshHello &h);
enum HelloReply : uint8_t {
  kHelloAccepted = 1,
  kHelloNotMesh,     // no hello's magic: not an hb mesh dial
  kHelloWrongNonce,  // a stranger, or a stale world's rank
  kHelloBadRank,     // world, rank or context out of this world's range
  kHelloUnexpected,  // this rank dials that peer, or it already connected
};
const char *hello_reply_text(uint8_t reply);

// addr (sockaddr_in/in6) as "10.0.0.2 port 37083", the port in host byte
// order, for hb's own messages. Gloo prints "[10.0.0.2]:56208", the port's
// two bytes swapped (comm/links.h); this form never contains Gloo's, so
// comm::Links never takes it for a link's address.
std::string address_text(const sockaddr_storage &addr);

// Starts the pair's non-blocking dial to peer (a listener's address); on
// connect it sends hello and waits for the listener's answer (in the
// device's loop). Waits for nothing here.
void start_dial(gloo::transport::Pair &pair, const sockaddr_storage &peer,
                const std::string &hello);
// Hands fd (accepted by a listener, hello answered) to the pair, which
// waits for it; closes fd and returns false if the pair was not waiting
// (closed, failed, or already connected). Called in the device's loop.
bool hand_accepted(gloo::transport::Pair &pair, int fd);
// Fails a pair waiting for an accept (the accepted connection broke).
void fail_accept(gloo::transport::Pair &pair, const std::string &why);
// Fails the pair (closing it, as Gloo's Pair::close does) unless it failed
// already: a connect or operation waiting on it throws why. Use this, not
// Pair::close, from hb's threads: the pair's lock is then taken and
// released here, where TSan sees both (Gloo's close unlocks in a tail call
// that TSan charges to its caller, after a lock it did not see).
void break_pair(gloo::transport::Pair &pair, const std::string &why);
// Ends another thread's wait in buf's waitSend (send) or waitRecv, which
// returns false, as Gloo's abortWaitSend/abortWaitRecv do; buf is one of
// a make_tcp_context context. The buffer's lock is taken and released
// here, where TSan sees both (Gloo's abortWait* unlock in a tail call that
// TSan charges to its caller, after a lock it did not see).
void abort_wait(gloo::transport::UnboundBuffer &buf, bool send);
// Waits (the pair's timeout) until the pair is connected or failed.
void wait_connected(gloo::transport::Pair &pair);
// The pair's connected socket, or -1. (A rank's accepted sockets all share
// its listener's address: only the pair knows which one is its own.)
int pair_socket(gloo::transport::Pair &pair);

}  // namespace comm
}  // namespace hb
