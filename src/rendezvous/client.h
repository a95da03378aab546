// Rendezvous client: one per rank, a TCP connection to the store with
// heartbeats. When the server reports a dead peer (or the server itself
// goes away), the context's Health fails with HB_ERR_PEER_FAILED naming the
// rank, and every pending and later call throws.
//
// Threading: all calls are safe from several threads at once (each waits
// for its own reply). A background thread reads the connection and sends
// heartbeats. A failure of the Health from anywhere (a peer lost, an abort,
// another module) wakes every pending call, which then throws the Health's
// error. The server going away (connection closed, or silent past
// peer_timeout_ms) fails the Health with HB_ERR_PEER_FAILED naming the
// server's address.
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
  // Bound on set/add/close, whose calls take no timeout of their own.
  int64_t request_timeout_ms = 300000;
};

class Client : public KV {
 public:
  // Connects, authenticates and registers the rank. Throws HB_ERR_TIMEOUT,
  // HB_ERR_PERMISSION (token) or HB_ERR_PEER_FAILED. `health` must outlive
  // the client; failures are reported there (nullptr: the client keeps its
  // own). A refused HELLO throws the server's status: HB_ERR_PERMISSION
  // (token), HB_ERR_CONFIG (rank taken or world size differs),
  // HB_ERR_PEER_FAILED / HB_ERR_ABORTED (the world is already broken).
  static std::unique_ptr<Client> connect(const ClientConfig &cfg,
                                         Health *health);
  ~Client() override = default;

  // All ranks of the world: HB_ERR_TIMEOUT names the ranks that did not arrive.
  virtual void barrier(const std::string &name, int64_t timeout_ms) = 0;
  // Broadcasts an abort: every rank's Health (this one's too) fails with
  // HB_ERR_ABORTED and "aborted by rank R: reason". Never throws.
  virtual void abort(const std::string &reason) = 0;
  // Tells the server this rank leaves on purpose (not a failure), even if
  // the Health has failed; closes. Idempotent; the destructor calls it.
  // Later calls throw HB_ERR_INVALID_ARGUMENT.
  virtual void close() = 0;
};

}  // namespace rdv
}  // namespace hb
