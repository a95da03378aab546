#include "comm/p2p_collectives.h"

#include <cstring>
#include <numeric>
#include <vector>

#include "comm/p2p.h"

namespace hb {
namespace comm {

void p2p_alltoallv_post(P2P &p2p, int channel, const int *group, int m, int me,
                        const char *send, const int64_t *send_counts,
                        const int64_t *send_offsets, char *recv,
                        const int64_t *recv_counts, const int64_t *recv_offsets,
                        size_t es) {
  for (int j = 1; j < m; ++j) {
    const int q = group[(me + m - j) % m];  // whoever sends to me first
    if (recv_counts[q])
      p2p.recv(q, channel, recv + size_t(recv_offsets[q]) * es,
               size_t(recv_counts[q]) * es);
  }
  for (int j = 1; j < m; ++j) {
    const int q = group[(me + j) % m];
    if (send_counts[q])
      p2p.send(q, channel, send + size_t(send_offsets[q]) * es,
               size_t(send_counts[q]) * es);
  }
  const int r = group[me];
  if (send_counts[r])
    std::memmove(recv + size_t(recv_offsets[r]) * es,
                 send + size_t(send_offsets[r]) * es,
                 size_t(send_counts[r]) * es);
}

void p2p_alltoallv(P2P &p2p, int channel, const char *send,
                   const int64_t *send_counts, const int64_t *send_offsets,
                   char *recv, const int64_t *recv_counts,
                   const int64_t *recv_offsets, size_t es) {
  std::vector<int> all(size_t(p2p.world_size()));
  std::iota(all.begin(), all.end(), 0);
  p2p_alltoallv_post(p2p, channel, all.data(), int(all.size()), p2p.rank(),
                     send, send_counts, send_offsets, recv, recv_counts,
                     recv_offsets, es);
  p2p.finish();
}

void p2p_allgatherv(P2P &p2p, int channel, const char *send, char *recv,
                    const int64_t *recv_counts, const int64_t *recv_offsets,
                    size_t es) {
  const int n = p2p.world_size(), r = p2p.rank();
  for (int j = 1; j < n; ++j) {
    const int q = (r + n - j) % n;
    if (recv_counts[q])
      p2p.recv(q, channel, recv + size_t(recv_offsets[q]) * es,
               size_t(recv_counts[q]) * es);
  }
  const size_t mine = size_t(recv_counts[r]) * es;
  if (mine)
    for (int j = 1; j < n; ++j) p2p.send((r + j) % n, channel, send, mine);
  char *own = recv + size_t(recv_offsets[r]) * es;
  if (mine && own != send) std::memcpy(own, send, mine);
  p2p.finish();
}

void p2p_broadcast(P2P &p2p, int channel, const char *send, char *recv,
                   size_t bytes, int root) {
  const int n = p2p.world_size(), r = p2p.rank();
  if (bytes == 0) return;
  if (r != root) {
    p2p.recv(root, channel, recv, bytes);
  } else {
    if (recv != send) std::memmove(recv, send, bytes);
    for (int j = 1; j < n; ++j) p2p.send((r + j) % n, channel, recv, bytes);
  }
  p2p.finish();
}

}  // namespace comm
}  // namespace hb
