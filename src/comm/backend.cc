// Backend's shared algorithms: what every transport can do with its own
// collectives (comm/backend.h).
#include "comm/backend.h"

#include <vector>

#include "abi/error.h"

namespace hb {
namespace comm {

void Backend::alltoallv_sized(const void *send, const int64_t *send_bytes,
                              const Deliver &deliver) {
  // Two rounds: the sizes, then the data.
  const size_t n = size_t(world_size());
  std::vector<int64_t> one(n, 1), at(n), recv_bytes(n);
  for (size_t q = 0; q < n; ++q) at[q] = int64_t(q);
  alltoallv(send_bytes, one.data(), at.data(), recv_bytes.data(), one.data(),
            at.data(), HB_INT64);
  alltoallv_known(send, send_bytes, recv_bytes, deliver);
}

void Backend::alltoallv_known(const void *send, const int64_t *send_bytes,
                              const std::vector<int64_t> &recv_bytes,
                              const Deliver &deliver) {
  const size_t n = size_t(world_size());
  std::vector<int64_t> so(n), ro(n);
  for (size_t q = 1; q < n; ++q) {
    so[q] = so[q - 1] + send_bytes[q - 1];
    ro[q] = ro[q - 1] + recv_bytes[q - 1];
  }
  for (size_t q = 0; q < n; ++q)
    if (recv_bytes[q] < 0)
      fail(HB_ERR_MISMATCH, "alltoallv: rank %zu announced %lld bytes", q,
           (long long)recv_bytes[q]);
  std::vector<char> recv(size_t(ro[n - 1] + recv_bytes[n - 1]));
  alltoallv(send, send_bytes, so.data(), recv.data(), recv_bytes.data(),
            ro.data(), HB_UINT8);
  for (size_t q = 0; q < n; ++q)
    deliver(int(q), recv.data() + ro[q], size_t(recv_bytes[q]));
}

}  // namespace comm
}  // namespace hb
