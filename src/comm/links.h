// The TCP sockets under a Gloo context, taken from its pairs once connected
// (comm/tcp_pair.h; a rank's accepted sockets all share its listener's
// address, so an address does not tell them apart), so
// that a failure reported elsewhere (a peer declared lost by the rendezvous
// heartbeats, hb_context_abort) can break a wait Gloo would otherwise sit
// in until its timeout: shutting a socket down makes Gloo's event loop see
// EOF, fail the pair and wake every buffer waiting on it. Also maps Gloo's
// "[addr]:port" in error messages back to the peer's rank.
#pragma once

#include <sys/socket.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace gloo {
class Context;
}

namespace hb {
namespace comm {

// Whether message names peer, an address as Gloo prints it ("[ip]:port"):
// the port must end where the message's number does. Gloo prints a port in
// network byte order, so printed ports differ in length, and one peer's
// "[127.0.0.1]:176" is the start of another's "[127.0.0.1]:17650".
bool message_names_peer(const std::string &message, const std::string &peer);

class Links {
 public:
  // Records the socket of every connected pair of ctx.
  void add_context(gloo::Context &ctx);
  // Records the sockets of ctx's pairs to peers (call once they are
  // connected: pairs made on first use, comm/mesh_connect.h).
  void add_pairs(gloo::Context &ctx, const std::vector<int> &peers);
  // Shuts every recorded socket down (idempotent, thread-safe).
  void break_all();
  // The rank whose peer address appears in a Gloo message, or -1.
  int rank_in_message(const std::string &message) const;
  // message with each recorded peer's address as Gloo prints it replaced
  // by its address_text (comm/tcp_pair.h): the port a user can look for.
  std::string readable(const std::string &message) const;

 private:
  struct Link {
    int fd;
    int rank;
    sockaddr_storage self;
    std::string peer;  // as Gloo prints it
    std::string text;  // address_text
  };
  mutable std::mutex mu_;
  std::vector<Link> links_;
};

}  // namespace comm
}  // namespace hb
