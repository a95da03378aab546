// Rendezvous server: the key-value store on a libuv loop in its own thread,
// served by rank 0 or by hbrun. Tracks each rank's liveness and tells every
// client when one is lost.
//
// Policies:
// - A rank whose connection closes without BYE, or that sends nothing for
//   peer_timeout_ms, is lost: every other client gets PEER_LOST(rank, why)
//   and on_peer_lost runs. The lost rank's connection is closed.
// - Once a rank is lost (or a client aborted), the world is broken for
//   good: a later HELLO is refused with HB_ERR_PEER_FAILED (or
//   HB_ERR_ABORTED) naming the first failure. There is no elastic rejoin.
// - A HELLO for a rank that is still connected (and has not said BYE) is
//   refused with HB_ERR_CONFIG naming both peers; the first connection is
//   unaffected. A rank that said BYE may connect again (a new context).
// - A malformed or oversized frame, or a protocol violation, gets one error
//   reply (id 0) and closes that connection only (logged at WARN).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace hb {
namespace rdv {

struct ServerConfig {
  std::string host = "0.0.0.0";
  int port = 0;  // 0: pick a free port (see Server::port)
  std::string token;
  int world_size = 1;
  int64_t heartbeat_interval_ms = 500;
  int64_t peer_timeout_ms = 5000;
  size_t max_frame_bytes = 64u << 20;
  // The destructor first waits up to this long for connected ranks to say
  // BYE (so a rank-0 server outlives its peers' last calls), then closes.
  int64_t linger_ms = 10000;
};

class Server {
 public:
  // Binds and starts serving; throws HB_ERR_IO naming the address.
  static std::unique_ptr<Server> start(const ServerConfig &cfg);
  virtual ~Server() = default;  // stops the loop and closes every connection
  virtual int port() const = 0;
  // Called (on the server thread) when a rank is declared lost; hbrun uses
  // it to stop the other workers.
  virtual void on_peer_lost(
      std::function<void(int rank, const std::string &why)> cb) = 0;

  // How a registered rank left the world.
  enum class Departure { kLost, kLeft, kAborted };
  // Called (on the server thread) for every rank that leaves, in the order
  // the server sees them go: lost (before on_peer_lost), said BYE, or sent
  // ABORT. A rank that dies first is seen first even when the ranks that
  // fail because of it exit before its parent can reap it: hbrun orders
  // failures by it to report the root cause.
  virtual void on_departure(
      std::function<void(int rank, Departure how)> cb) = 0;
  // Called (on the server thread) for every HELLO the server accepts,
  // before the rank gets its reply: once a rank has joined, its loss breaks
  // the world (hbrun then restarts a ps job as a whole, not the rank alone).
  virtual void on_join(std::function<void(int rank)> cb) = 0;
};

}  // namespace rdv
}  // namespace hb
