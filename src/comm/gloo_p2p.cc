#include "comm/gloo_p2p.h"

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <stdexcept>

#include "abi/error.h"
#include "comm/tcp_pair.h"

namespace hb {
namespace comm {

namespace {
// Top byte of our slots: apart from the prefixes Gloo's own collectives
// use (small numbers), which share the context.
constexpr uint64_t kSlotPrefix = 0xb7;
constexpr int kMaxChannels = 256;
}  // namespace

void WaitBreaker::trip() {
  std::lock_guard<std::mutex> lock(mu_);
  tripped_ = true;
  if (waiting_) abort_wait(*waiting_, waiting_send_);
}

GlooP2P::GlooP2P(gloo::Context &ctx, uint32_t tag,
                 std::chrono::milliseconds timeout, WaitBreaker &breaker)
    : ctx_(ctx), tag_(tag), timeout_(timeout), breaker_(breaker) {}

// Every operation must be finished before its buffer goes. One still
// pending belongs to a call that failed (its wait threw, or an exception
// unwound the call before it): its peer may be alive, and Gloo's loop
// thread may still fill or drain the buffer and signal it. Its pair is
// failed first, as Gloo fails every pair of a context on a timed-out wait:
// under the pair's lock, which the loop holds whenever it touches a
// buffer, and closed, so the loop touches none of its buffers again. The
// pair's stream is out of step with its peer's after a failed call anyway
// (and a failed call fails the context: GlooBackend::fail_from_gloo).
GlooP2P::~GlooP2P() {
  std::vector<bool> broken(size_t(ctx_.size), false);
  for (const Op &op : ops_) {
    if (op.done || broken[size_t(op.peer)]) continue;
    broken[size_t(op.peer)] = true;
    auto &pair = ctx_.getPair(op.peer);
    if (!pair) continue;
    try {
      break_pair(*pair, "a call failed with operations pending on this pair");
    } catch (...) {  // not a pair of make_tcp_context: Gloo's own close
      pair->close();
    }
  }
}

int GlooP2P::rank() const { return ctx_.rank; }
int GlooP2P::world_size() const { return ctx_.size; }

uint64_t GlooP2P::slot(int channel) const {
  if (channel < 0 || channel >= kMaxChannels)
    fail(HB_ERR_INTERNAL, "p2p channel %d out of range", channel);
  return (kSlotPrefix << 56) | (uint64_t(tag_) << 8) | uint64_t(channel);
}

int GlooP2P::post(int peer, int channel, void *data, size_t bytes,
                  bool is_send) {
  if (bytes == 0 || peer == ctx_.rank || peer < 0 || peer >= ctx_.size)
    fail(HB_ERR_INTERNAL, "p2p: bad operation (peer %d, %zu bytes)", peer,
         bytes);
  Op op{ctx_.createUnboundBuffer(data, bytes), peer, is_send, false};
  if (is_send)
    op.buf->send(peer, slot(channel));
  else
    op.buf->recv(peer, slot(channel));
  ops_.push_back(std::move(op));
  return static_cast<int>(ops_.size()) - 1;
}

int GlooP2P::send(int peer, int channel, const void *data, size_t bytes) {
  // Gloo only reads a buffer it sends from.
  return post(peer, channel, const_cast<void *>(data), bytes, true);
}

int GlooP2P::recv(int peer, int channel, void *data, size_t bytes) {
  return post(peer, channel, data, bytes, false);
}

void GlooP2P::wait(int id) {
  Op &op = ops_.at(static_cast<size_t>(id));
  if (op.done) return;
  {
    std::lock_guard<std::mutex> lock(breaker_.mu_);
    if (breaker_.tripped_) throw std::runtime_error("wait broken");
    breaker_.waiting_ = op.buf.get();
    breaker_.waiting_send_ = op.is_send;
  }
  struct Clear {
    WaitBreaker &b;
    ~Clear() {
      std::lock_guard<std::mutex> lock(b.mu_);
      b.waiting_ = nullptr;
    }
  } clear{breaker_};
  // Gloo throws on a timeout or a failed pair; false: the breaker tripped.
  const bool ok =
      op.is_send ? op.buf->waitSend(timeout_) : op.buf->waitRecv(timeout_);
  if (!ok) throw std::runtime_error("wait broken");
  op.done = true;
}

void GlooP2P::finish() {
  for (size_t i = 0; i < ops_.size(); ++i) wait(static_cast<int>(i));
}

}  // namespace comm
}  // namespace hb
