// A loopback TCP port that was free a moment ago (for rendezvous addresses
// of ranks a test starts itself): one below the kernel's ephemeral range
// where it can, so that no connect() of the tests running beside this one
// takes it before the test listens on it (CI once lost a restart test to a
// port in that range); else one the kernel hands out. 0 if none.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <random>

inline int hb_test_bind_loopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof a;
  int got = 0;
  if (bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len) == 0)
    got = ntohs(a.sin_port);
  close(fd);
  return got;
}

inline int hb_test_free_port() {
  int low = 32768;
  if (FILE *f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%d", &low) != 1) low = 32768;
    std::fclose(f);
  }
  if (low > 10001) {
    std::random_device rd;
    std::mt19937 gen(rd());
    std::uniform_int_distribution<int> pick(10000, low - 1);
    for (int i = 0; i < 200; ++i)
      if (int port = hb_test_bind_loopback(pick(gen))) return port;
  }
  return hb_test_bind_loopback(0);
}
