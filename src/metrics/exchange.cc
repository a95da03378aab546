#include "metrics/exchange.h"

#include "abi/error.h"
#include "comm/communicator.h"
#include "common/mismatch.h"
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

Gathered allgather_bytes(hb_context *ctx, const Bytes &mine,
                         const MergeSig &sig) {
  hb_context &c = ctx_ref(ctx);
  const int world = c.cluster.world_size;
  const int kHeader = 4;  // size, kind, config, seq
  int64_t header[kHeader] = {static_cast<int64_t>(mine.size()), sig.kind,
                             sig.config, sig.seq};
  std::vector<int64_t> all(static_cast<size_t>(kHeader) * world);
  run("hb_allgather of state sizes", [&] {
    comm::allgather(c, comm::Memory::kHost, header, all.data(), kHeader,
                    HB_INT64);
  });
  check_same_calls(all.data(), world, kHeader, 1, 3, "hb_metric_result",
                   [](const int64_t *h) {
                     return format(
                         "metric kind %lld, config %016llx, merge "
                         "%lld",
                         (long long)h[1], (unsigned long long)h[2],
                         (long long)h[3]);
                   });
  if (sig.counter) ++*sig.counter;
  Gathered g;
  std::vector<int64_t> &sizes = g.sizes, &offsets = g.offsets;
  sizes.resize(world);
  offsets.resize(world);
  for (int r = 0; r < world; ++r)
    sizes[r] = all[static_cast<size_t>(r) * kHeader];
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
