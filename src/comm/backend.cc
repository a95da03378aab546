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
  const std::vector<int64_t> so = packed_offsets(send_bytes),
                             ro = packed_offsets(recv_bytes.data());
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

std::vector<int64_t> Backend::packed_offsets(const int64_t *bytes) const {
  const size_t n = size_t(world_size());
  std::vector<int64_t> at(n, 0);
  for (size_t q = 1; q < n; ++q) at[q] = at[q - 1] + bytes[q - 1];
  return at;
}

void Backend::alltoallv_fill(const int64_t *send_bytes,
                             const int64_t *recv_bytes, const Fill &fill,
                             const Deliver &deliver) {
  const char *got = alltoallv_staged(send_bytes, recv_bytes, fill);
  const std::vector<int64_t> ro = packed_offsets(recv_bytes);
  for (int q = 0; q < world_size(); ++q)
    deliver(q, got + ro[size_t(q)], size_t(recv_bytes[q]));
}

const char *Backend::alltoallv_staged(const int64_t *send_bytes,
                                      const int64_t *recv_bytes,
                                      const Fill &fill, const char *in,
                                      const Move &move) {
  const int n = world_size();
  const std::vector<int64_t> so = packed_offsets(send_bytes),
                             ro = packed_offsets(recv_bytes);
  if (!in) {
    char *s = fill_send_.ensure(size_t(so.back() + send_bytes[n - 1]));
    for (int q = 0; q < n; ++q)
      if (send_bytes[q]) fill(q, s + so[size_t(q)]);
    in = s;
  }
  char *out = fill_recv_.ensure(size_t(ro.back() + recv_bytes[n - 1]));
  if (move)
    move(in, so.data(), out, ro.data());
  else
    alltoallv(in, send_bytes, so.data(), out, recv_bytes, ro.data(), HB_UINT8);
  return out;
}

}  // namespace comm
}  // namespace hb
