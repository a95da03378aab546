// Rendezvous server: the key-value store on a libuv loop in its own thread,
// served by rank 0 or by hbrun. Tracks each rank's liveness and tells every
// client when one is lost.
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
};

class Server {
 public:
  // Binds and starts serving; throws HB_ERR_IO naming the address.
  static std::unique_ptr<Server> start(const ServerConfig &cfg);
  virtual ~Server() = default;  // stops the loop and closes every connection
  virtual int port() const = 0;
  // Called (on the server thread) when a rank is declared lost; hbrun uses
  // it to stop the other workers.
  virtual void on_peer_lost(std::function<void(int rank, const std::string &why)> cb) = 0;
};

}  // namespace rdv
}  // namespace hb
