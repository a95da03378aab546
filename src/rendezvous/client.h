// Rendezvous client: one per rank, a TCP connection to the store with
// heartbeats. When the server reports a dead peer (or the server itself
// goes away), the context's Health fails with HB_ERR_PEER_FAILED naming the
// rank, and every pending and later call throws.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rendezvous/kv.h"

namespace hb {
class Health;
namespace rdv {

struct ClientConfig {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string token;  // must match the server's, if it has one
  int rank = 0;
  int world_size = 1;
  int64_t connect_timeout_ms = 60000;  // retries until the server is up
  int64_t heartbeat_interval_ms = 500;
  int64_t peer_timeout_ms = 5000;
  size_t max_frame_bytes = 64u << 20;
};

class Client : public KV {
 public:
  // Connects, authenticates and registers the rank. Throws HB_ERR_TIMEOUT,
  // HB_ERR_PERMISSION (token) or HB_ERR_PEER_FAILED. `health` must outlive
  // the client; failures are reported there.
  static std::unique_ptr<Client> connect(const ClientConfig &cfg, Health *health);
  ~Client() override = default;

  // All ranks of the world: HB_ERR_TIMEOUT names the ranks that did not arrive.
  virtual void barrier(const std::string &name, int64_t timeout_ms) = 0;
  // Broadcasts an abort: every rank's Health fails with HB_ERR_ABORTED.
  virtual void abort(const std::string &reason) = 0;
  // Tells the server this rank leaves on purpose (not a failure); closes.
  virtual void close() = 0;
};

}  // namespace rdv
}  // namespace hb
