// The table's exchange over a context's public collectives.
#include <cstring>

#include "abi/error.h"
#include "embedding/exchange.h"

namespace hb {
namespace emb {
namespace {

class ContextExchange : public Exchange {
 public:
  explicit ContextExchange(hb_context *ctx) : ctx_(ctx) {}
  int rank() const override { return hb_context_rank(ctx_); }
  int world() const override { return hb_context_world_size(ctx_); }
  void alltoall(const int64_t *send, int64_t *recv, size_t k) override {
    if (world() == 1) {  // nothing to exchange: skip the backend
      std::memcpy(recv, send, k * 8);
      return;
    }
    check(hb_alltoall(ctx_, send, recv, k, HB_INT64));
  }
  void alltoallv(const void *send, const int64_t *send_bytes, void *recv,
                 const int64_t *recv_bytes) override {
    if (world() == 1) {
      if (send_bytes[0])
        std::memcpy(recv, send, static_cast<size_t>(recv_bytes[0]));
      return;
    }
    check(hb_alltoallv(ctx_, send, send_bytes, nullptr, recv, recv_bytes,
                       nullptr, HB_UINT8));
  }

 private:
  static void check(hb_status st) {
    // The collective already recorded its detail on this thread.
    if (st != HB_OK) throw Error(st, hb_last_error());
  }
  hb_context *ctx_;
};

}  // namespace

std::unique_ptr<Exchange> make_context_exchange(hb_context *ctx) {
  return std::unique_ptr<Exchange>(new ContextExchange(ctx));
}

}  // namespace emb
}  // namespace hb
