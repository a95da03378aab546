// An uneven alltoallv for tests that check who connects to whom: rank r
// sends r + q + 1 elements to rank q, blocks packed in rank order.
#pragma once

#include <cstdint>
#include <vector>

namespace hb {
namespace test {

struct A2aPattern {
  std::vector<int64_t> sc, so, rc, ro;  // send/recv counts and offsets
  int64_t send_total = 0, recv_total = 0;
  A2aPattern(int n, int r) : sc(n), so(n), rc(n), ro(n) {
    for (int q = 0; q < n; ++q) {
      sc[q] = r + q + 1, rc[q] = q + r + 1;
      so[q] = send_total, ro[q] = recv_total;
      send_total += sc[q], recv_total += rc[q];
    }
  }
};

}  // namespace test
}  // namespace hb
