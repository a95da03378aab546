// Small blocking-with-deadline TCP helpers on non-blocking sockets, for the
// rendezvous client (the server uses libuv).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace hb {
namespace rdv {

// One connection attempt to host:port bounded by timeout_ms. Returns a
// non-blocking, close-on-exec socket with TCP_NODELAY, or -1 with *err set.
int tcp_connect(const std::string &host, int port, int64_t timeout_ms,
                std::string *err);

// Writes all n bytes before deadline_ms (a now_ms() value), polling in
// short slices so that `cancelled` (may be empty) can stop it. Returns
// false with *err set on error, deadline or cancellation.
bool tcp_send_all(int fd, const char *data, size_t n, int64_t deadline_ms,
                  const std::function<bool()> &cancelled, std::string *err);

}  // namespace rdv
}  // namespace hb
