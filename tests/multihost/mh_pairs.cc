// One rank of the lazy-pairs check (lazy_pairs_test.sh): counts this
// process's established TCP sockets (/proc/self/fd socket inodes, looked up
// in /proc/net/tcp and tcp6 of its network namespace), apart from those to
// or from the rendezvous store's port, after forming the world and again
// after an allreduce and an alltoallv, and prints
//   mh_pairs rank R: formed same-host S other-host O; after calls same-host
//   S other-host O
// A socket is same-host when both ends have the same address (each
// namespace has one). The calls' results are checked exactly.
//   mh_pairs STORE_PORT
#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/a2a_pattern.h"
#include "common/mp_check.h"
#include "hb.h"

int g_mp_rank = -1;
const char *g_mp_name = "mh_pairs";

namespace {

std::set<unsigned long> socket_inodes() {
  std::set<unsigned long> out;
  DIR *d = opendir("/proc/self/fd");
  if (!d) return out;
  while (dirent *e = readdir(d)) {
    char link[64] = {0};
    const std::string path = std::string("/proc/self/fd/") + e->d_name;
    const ssize_t n = readlink(path.c_str(), link, sizeof link - 1);
    unsigned long ino = 0;
    if (n > 0 && std::sscanf(link, "socket:[%lu]", &ino) == 1) out.insert(ino);
  }
  closedir(d);
  return out;
}

struct Count {
  int same = 0, other = 0;
};

// /proc/net/tcp lines: sl local rem st ... inode; addresses as HEX:PORT.
Count count(int store_port) {
  const std::set<unsigned long> mine = socket_inodes();
  Count c;
  for (const char *file : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(file);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream ss(line);
      std::string sl, local, remote, st, skip;
      unsigned long inode = 0;
      ss >> sl >> local >> remote >> st;
      for (int i = 0; i < 5; ++i)
        ss >> skip;  // tx:rx tr:when retrnsmt uid timeout
      ss >> inode;
      if (st != "01" || !mine.count(inode)) continue;  // 01: ESTABLISHED
      const size_t lc = local.rfind(':'), rc = remote.rfind(':');
      const int lport = int(std::strtol(local.c_str() + lc + 1, nullptr, 16));
      const int rport = int(std::strtol(remote.c_str() + rc + 1, nullptr, 16));
      if (lport == store_port || rport == store_port) continue;
      if (local.substr(0, lc) == remote.substr(0, rc))
        ++c.same;
      else
        ++c.other;
    }
  }
  return c;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: mh_pairs STORE_PORT\n");
    return 2;
  }
  const int store_port = std::atoi(argv[1]);
  hb_context *ctx = nullptr;
  CHECK_OK(hb_context_create(nullptr, &ctx));
  g_mp_rank = hb_context_rank(ctx);
  const int n = hb_context_world_size(ctx);
  // Every rank formed (its backend made) before anyone counts.
  CHECK_OK(hb_context_barrier(ctx, 30000));
  const Count formed = count(store_port);
  // Integers in floats: the sum is exact whatever the order.
  std::vector<float> a(1001), b(a.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(g_mp_rank * 1000 + int(i));
  CHECK_OK(hb_allreduce(ctx, a.data(), b.data(), a.size(), HB_FLOAT32, HB_SUM));
  for (size_t i = 0; i < a.size(); ++i) {
    const float want = float(1000 * n * (n - 1) / 2 + n * int(i));
    CHECK(b[i] == want, "allreduce element %zu: %g, not %g", i, b[i], want);
  }
  // alltoallv: rank r sends r + q + 1 floats of value 100 r + q to rank q.
  const hb::test::A2aPattern p(n, g_mp_rank);
  std::vector<float> out(static_cast<size_t>(p.send_total)),
      in(static_cast<size_t>(p.recv_total));
  for (int q = 0; q < n; ++q)
    for (int64_t i = 0; i < p.sc[q]; ++i)
      out[size_t(p.so[q] + i)] = float(100 * g_mp_rank + q);
  CHECK_OK(hb_alltoallv(ctx, out.data(), p.sc.data(), p.so.data(), in.data(),
                        p.rc.data(), p.ro.data(), HB_FLOAT32));
  for (int q = 0; q < n; ++q)
    for (int64_t i = 0; i < p.rc[q]; ++i)
      CHECK(in[size_t(p.ro[q] + i)] == float(100 * q + g_mp_rank),
            "alltoallv: element %lld from rank %d", static_cast<long long>(i),
            q);
  const Count after = count(store_port);
  std::printf(
      "mh_pairs rank %d: formed same-host %d other-host %d; after calls "
      "same-host %d other-host %d\n",
      g_mp_rank, formed.same, formed.other, after.same, after.other);
  std::fflush(stdout);
  CHECK_OK(hb_context_barrier(ctx, 30000));
  hb_context_destroy(ctx);
  return 0;
}
