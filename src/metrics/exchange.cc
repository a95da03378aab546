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

// Offsets of every rank's bytes packed in rank order; returns the total.
int64_t pack(const std::vector<int64_t> &sizes, std::vector<int64_t> *offsets,
             const char *what) {
  offsets->resize(sizes.size());
  int64_t total = 0;
  for (size_t r = 0; r < sizes.size(); ++r) {
    if (sizes[r] < 0)
      fail(HB_ERR_CORRUPT, "metric result: rank %zu reported %s of %lld bytes",
           r, what, static_cast<long long>(sizes[r]));
    (*offsets)[r] = total;
    total += sizes[r];
  }
  return total;
}

// Every rank's config fields (on the error path only).
std::vector<std::string> gather_strings(hb_context &c,
                                        const std::string &mine) {
  const int world = c.cluster.world_size;
  int64_t size = static_cast<int64_t>(mine.size());
  std::vector<int64_t> sizes(world), offsets;
  run("hb_allgather of config sizes", [&] {
    comm::allgather(c, comm::Memory::kHost, &size, sizes.data(), 1, HB_INT64);
  });
  std::string all(static_cast<size_t>(pack(sizes, &offsets, "a config")), '\0');
  run("hb_allgatherv of configs", [&] {
    comm::allgatherv(c, comm::Memory::kHost, mine.data(), mine.size(), &all[0],
                     sizes.data(), offsets.data(), HB_UINT8);
  });
  std::vector<std::string> out;
  for (int r = 0; r < world; ++r)
    out.push_back(all.substr(offsets[r], sizes[r]));
  return out;
}

}  // namespace

Gathered allgather_bytes(hb_context *ctx, const Bytes &mine,
                         const MergeSig &sig) {
  hb_context &c = ctx_ref(ctx);
  const int world = c.cluster.world_size;
  const int kHeader = 4;  // size, kind, config, seq
  const int64_t config = static_cast<int64_t>(sig.config->fingerprint());
  int64_t header[kHeader] = {static_cast<int64_t>(mine.size()), sig.kind,
                             config, sig.seq};
  std::vector<int64_t> all(static_cast<size_t>(kHeader) * world);
  run("hb_allgather of state sizes", [&] {
    comm::allgather(c, comm::Memory::kHost, header, all.data(), kHeader,
                    HB_INT64);
  });
  std::vector<uint64_t> prints(world);
  for (int r = 0; r < world; ++r)
    prints[r] =
        static_cast<uint64_t>(all[static_cast<size_t>(r) * kHeader + 2]);
  check_same_fields(
      *sig.config, prints,
      [&](const std::string &s) { return gather_strings(c, s); },
      HB_ERR_MISMATCH, "hb_metric_result", "metric configs");
  check_same_calls(all.data(), world, kHeader, 1, 3, "hb_metric_result",
                   [](const int64_t *h) {
                     return format("metric kind %lld, merge %lld",
                                   (long long)h[1], (long long)h[3]);
                   });
  if (sig.counter) ++*sig.counter;
  Gathered g;
  g.sizes.resize(world);
  for (int r = 0; r < world; ++r)
    g.sizes[r] = all[static_cast<size_t>(r) * kHeader];
  const int64_t total = pack(g.sizes, &g.offsets, "a state");
  g.bytes.resize(static_cast<size_t>(total));
  run("hb_allgatherv of states", [&] {
    comm::allgatherv(c, comm::Memory::kHost, mine.data(), mine.size(),
                     g.bytes.data(), g.sizes.data(), g.offsets.data(),
                     HB_UINT8);
  });
  return g;
}

}  // namespace metrics
}  // namespace hb
