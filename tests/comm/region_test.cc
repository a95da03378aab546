// The registered pair regions' memory per rank (comm/region_p2p.h,
// docs/scaling.md "Memory per rank"): bounded whatever the world's size.
#include <gtest/gtest.h>

#include <gloo/context.h>

#include "comm/region_p2p.h"

namespace {

// What the direct reduction's regions take once every peer is registered:
// 2 parities x ((n - 1) peers x 2 channels x area + send region).
size_t direct_region_bytes(int n, size_t max_bytes, size_t one_round) {
  gloo::Context ctx(0, n);  // no transport: the sizes only
  hb::comm::PairRegions r(ctx, max_bytes, one_round);
  return 2 * (size_t(n - 1) * hb::comm::RegionP2P::kChannels * r.area_bytes() +
              r.send_bytes());
}

// At the defaults (cpu_staged_bytes 2 MiB, cpu_one_round_bytes 64 KiB) at
// most ~6 x 2 MiB per rank from 2 to 1024 ranks (before: 4 x 64 KiB per
// peer, 256 MiB at 1024), and no less room than a call needs: a whole
// one-round buffer (one_round / (n - 1)) or a block (max / n) per area.
TEST(PairRegions, DirectRegionsStayBoundedAsTheWorldGrows) {
  const size_t max = size_t(2) << 20, one_round = size_t(64) << 10;
  for (int n : {2, 3, 4, 16, 64, 256, 1024}) {
    EXPECT_LE(direct_region_bytes(n, max, one_round), 6 * max + (1u << 20))
        << n << " ranks";
    gloo::Context ctx(0, n);
    hb::comm::PairRegions r(ctx, max, one_round);
    EXPECT_GE(r.area_bytes(), one_round / size_t(n - 1)) << n;
    EXPECT_GE(r.area_bytes(), (max + size_t(n) - 1) / size_t(n)) << n;
  }
}

}  // namespace
