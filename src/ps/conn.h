// A worker's connection to one ps task: request/response over TCP, every
// wait bounded. The calling thread writes a request and reads until its
// reply; a heartbeat thread (client.h) pings, and the ps answers every ping
// with a pong, so a worker waiting on a parked request (the staleness gate)
// still hears from a live ps and notices a silent one within
// peer_timeout_ms. A closed connection is a dead ps at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "ps/wire.h"

namespace hb {
class Health;
namespace ps {

struct ConnConfig {
  std::string host;
  int port = 0;
  int ps_index = 0;
  int rank = 0, world = 1;
  int64_t connect_timeout_ms = 60000;
  int64_t peer_timeout_ms = 5000;
  int64_t timeout_ms = 300000;
  size_t max_frame_bytes = 64u << 20;
};

class Conn {
 public:
  // Connects (retrying until connect_timeout_ms: the ps may start later)
  // and says hello. Failures go to `health` as well (it must outlive the
  // connection).
  Conn(const ConnConfig &cfg, Health *health);
  ~Conn();
  Conn(const Conn &) = delete;
  Conn &operator=(const Conn &) = delete;

  // Sends req, returns the reply's payload (ints and strs after the status
  // and message). Throws the reply's error; HB_ERR_PEER_FAILED when the ps
  // closed the connection or was silent past peer_timeout_ms (and fails
  // the Health); HB_ERR_TIMEOUT past timeout_ms.
  Frame call(Frame req, const char *what) { return finish(start(req), what); }
  // The two halves of call(), so requests to several ps tasks overlap:
  // start sends and returns the request id, finish waits for its reply
  // (replies come in request order).
  uint64_t start(Frame req);
  // gated: a pull or push the ps may park at the staleness gate; the ps
  // answers it with the reason after timeout_ms (server.h), so this waits
  // peer_timeout_ms longer, a backstop for a ps that does not answer.
  Frame finish(uint64_t id, const char *what, bool gated = false);
  // Heartbeat (any thread); a broken connection fails the Health.
  void ping();
  // Leaving on purpose: a BYE the ps acknowledges (bounded wait).
  void bye();
  const std::string &address() const { return addr_; }

 private:
  void send(const Frame &f);
  [[noreturn]] void broken(const std::string &why);
  std::string who() const;

  ConnConfig cfg_;
  Health *health_;
  std::string addr_;
  int fd_ = -1;
  std::mutex write_mu_;
  std::atomic<bool> broken_{false};
  uint64_t next_id_ = 1;
  rdv::FrameDecoder decoder_;
};

}  // namespace ps
}  // namespace hb
