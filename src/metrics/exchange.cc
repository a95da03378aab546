#include "metrics/exchange.h"

#include "abi/error.h"
#include "comm/communicator.h"
#include "context/context.h"

namespace hb {
namespace metrics {
namespace {

// Runs one collective; its failure names the step of the merge.
template <class F>
void run(const char *what, F collective) {
  try {
    collective();
  } catch (const Error &e) {
    fail(e.status(), "metric result: %s failed: %s", what, e.what());
  }
}

}  // namespace

Gathered allgather_bytes(hb_context *ctx, const Bytes &mine) {
  hb_context &c = ctx_ref(ctx);
  const int world = c.cluster.world_size;
  int64_t my_size = static_cast<int64_t>(mine.size());
  Gathered g;
  std::vector<int64_t> &sizes = g.sizes, &offsets = g.offsets;
  sizes.resize(world);
  offsets.resize(world);
  run("hb_allgather of state sizes", [&] {
    comm::allgather(c, comm::Memory::kHost, &my_size, sizes.data(), 1,
                    HB_INT64);
  });
  int64_t total = 0;
  for (int r = 0; r < world; ++r) {
    if (sizes[r] < 0)
      fail(HB_ERR_CORRUPT, "metric result: rank %d reported size %lld", r,
           static_cast<long long>(sizes[r]));
    offsets[r] = total;
    total += sizes[r];
  }
  g.bytes.resize(static_cast<size_t>(total));
  run("hb_allgatherv of states", [&] {
    comm::allgatherv(c, comm::Memory::kHost, mine.data(), mine.size(),
                     g.bytes.data(), sizes.data(), offsets.data(), HB_UINT8);
  });
  return g;
}

}  // namespace metrics
}  // namespace hb
