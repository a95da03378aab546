// A TCP port to hand to a process that will listen on it later (hbrun's
// MASTER_PORT and --ps tasks, the tests' ranks). Header-only: the tests'
// process drivers that link no hb use it too.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>

namespace hb {

namespace free_port_detail {

// Binds a TCP socket to host (numeric) and port (0: the kernel picks one)
// and closes it: the port it got, 0 if none.
inline int probe_port(const std::string &host, int port) {
  bool ipv6 = host.find(':') != std::string::npos;
  sockaddr_storage ss{};
  socklen_t len = ipv6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  auto *v4 = reinterpret_cast<sockaddr_in *>(&ss);
  auto *v6 = reinterpret_cast<sockaddr_in6 *>(&ss);
  ss.ss_family = ipv6 ? AF_INET6 : AF_INET;
  bool ok = ipv6 ? inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1
                 : inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1;
  (ipv6 ? v6->sin6_port : v4->sin_port) = htons(uint16_t(port));
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int got = 0;
  auto *sa = reinterpret_cast<sockaddr *>(&ss);
  if (ok && fd >= 0 && bind(fd, sa, len) == 0 && getsockname(fd, sa, &len) == 0)
    got = ntohs(ipv6 ? v6->sin6_port : v4->sin_port);
  if (fd >= 0) close(fd);
  return got;
}

// The first port of the kernel's ephemeral range (32768 if unreadable).
inline int ephemeral_low() {
  int low = 32768;
  if (FILE *f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%d", &low) != 1) low = 32768;
    std::fclose(f);
  }
  return low;
}

}  // namespace free_port_detail

// A port that was free on host (numeric) a moment ago: below the kernel's
// ephemeral range where one is (a port the kernel hands out from that
// range can be taken by any connect() on the host before the listener
// binds it), else one the kernel picks; `fallback` if none can be had.
inline int free_port(const std::string &host, int fallback) {
  // 64 random tries below the ephemeral range (a test lost a start to a
  // port from it), then the kernel's choice.
  constexpr int kLowest = 10000;
  const int low = free_port_detail::ephemeral_low();
  if (low > kLowest + 1) {
    std::random_device rd;
    std::mt19937 gen(rd());
    std::uniform_int_distribution<int> pick(kLowest, low - 1);
    for (int i = 0; i < 64; ++i)
      if (int port = free_port_detail::probe_port(host, pick(gen))) return port;
  }
  const int port = free_port_detail::probe_port(host, 0);
  return port ? port : fallback;
}

}  // namespace hb
