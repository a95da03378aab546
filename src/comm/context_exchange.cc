// The table's exchange over a context's internal communicator.
#include <cstring>

#include "comm/context_exchange.h"

#include "comm/backend.h"
#include "comm/communicator.h"
#include "context/context.h"
#include "timeline/timeline.h"

namespace hb {
namespace comm {
namespace {

class ContextExchange : public Exchange {
 public:
  explicit ContextExchange(hb_context *ctx) : ctx_(ctx_ref(ctx)) {}
  int rank() const override { return ctx_.cluster.rank; }
  int world() const override { return ctx_.cluster.world_size; }
  void alltoall(const int64_t *send, int64_t *recv, size_t k) override {
    if (world() == 1) {  // nothing to exchange: skip the backend
      // Recorded as the collective would be, so timelines of any world
      // size show the same events.
      timeline::Span span("alltoall", "comm", static_cast<int64_t>(k * 8));
      std::memcpy(recv, send, k * 8);
      return;
    }
    comm::alltoall(ctx_, comm::Memory::kHost, send, recv, k, HB_INT64);
  }
  void alltoallv(const void *send, const int64_t *send_bytes, void *recv,
                 const int64_t *recv_bytes) override {
    if (world() == 1) {
      timeline::Span span("alltoallv", "comm", send_bytes[0]);
      if (send_bytes[0])
        std::memcpy(recv, send, static_cast<size_t>(recv_bytes[0]));
      return;
    }
    comm::alltoallv(ctx_, comm::Memory::kHost, send, send_bytes, nullptr, recv,
                    recv_bytes, nullptr, HB_UINT8);
  }
  bool sized_in_one_round() const override {
    return world() > 1 && cpu_backend(ctx_).sized_in_one_round();
  }
  void alltoallv_sized(const void *send, const int64_t *send_bytes,
                       const Deliver &deliver) override {
    timeline::Span span("alltoallv", "comm");
    ctx_.check();
    cpu_backend(ctx_).alltoallv_sized(send, send_bytes, deliver);
  }
  void alltoallv_fill(const int64_t *send_bytes, const int64_t *recv_bytes,
                      const Fill &fill, const Deliver &deliver) override {
    if (world() == 1)
      return Exchange::alltoallv_fill(send_bytes, recv_bytes, fill, deliver);
    timeline::Span span("alltoallv", "comm");
    ctx_.check();
    cpu_backend(ctx_).alltoallv_fill(send_bytes, recv_bytes, fill, deliver);
  }

 private:
  hb_context &ctx_;
};

// A world of one: what a worker's table on the ps tasks runs its local
// half of a step over (src/ps), whatever its context's world.
class LocalExchange : public Exchange {
 public:
  int rank() const override { return 0; }
  int world() const override { return 1; }
  void alltoall(const int64_t *send, int64_t *recv, size_t k) override {
    std::memcpy(recv, send, k * 8);
  }
  void alltoallv(const void *send, const int64_t *send_bytes, void *recv,
                 const int64_t *recv_bytes) override {
    if (send_bytes[0])
      std::memcpy(recv, send, static_cast<size_t>(recv_bytes[0]));
  }
};

}  // namespace

std::unique_ptr<Exchange> make_context_exchange(hb_context *ctx) {
  return std::unique_ptr<Exchange>(new ContextExchange(ctx));
}

std::unique_ptr<Exchange> make_local_exchange() {
  return std::unique_ptr<Exchange>(new LocalExchange());
}

}  // namespace comm
}  // namespace hb
