// P2P over a Gloo context's unbound buffers (TCP transport): one buffer per
// operation, on slots derived from the call's tag, so consecutive calls
// never match each other's messages.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "comm/p2p.h"

namespace gloo {
class Context;
namespace transport {
class UnboundBuffer;
}
}  // namespace gloo

namespace hb {
namespace comm {

// Ends the wait of the call in progress from another thread (the backend's
// Health subscription: a peer declared lost, hb_context_abort). A pending
// operation whose peer is merely silent would otherwise sit out the whole
// timeout: its pair sees no error.
class WaitBreaker {
 public:
  void trip();  // this and every later wait fails
 private:
  friend class GlooP2P;
  std::mutex mu_;
  gloo::transport::UnboundBuffer *waiting_ = nullptr;
  bool waiting_send_ = false;
  bool tripped_ = false;
};

class GlooP2P final : public P2P {
 public:
  // tag: the same on every rank for the same call. A wait ends early, with
  // a std::runtime_error, once breaker trips. ctx: of make_tcp_context
  // (comm/tcp_pair.h).
  GlooP2P(gloo::Context &ctx, uint32_t tag, std::chrono::milliseconds timeout,
          WaitBreaker &breaker);
  // Fails the pair of every operation not finished (a failed call) before
  // its buffer goes.
  ~GlooP2P() override;

  int rank() const override;
  int world_size() const override;
  int send(int peer, int channel, const void *data, size_t bytes) override;
  int recv(int peer, int channel, void *data, size_t bytes) override;
  void wait(int id) override;
  void finish() override;

 private:
  struct Op {
    std::unique_ptr<gloo::transport::UnboundBuffer> buf;
    int peer;
    bool is_send;
    bool done;
  };
  uint64_t slot(int channel) const;
  int post(int peer, int channel, void *data, size_t bytes, bool is_send);

  gloo::Context &ctx_;
  uint32_t tag_;
  std::chrono::milliseconds timeout_;
  WaitBreaker &breaker_;
  std::vector<Op> ops_;
};

}  // namespace comm
}  // namespace hb
