// "host:port" as found in HB_RENDEZVOUS and TF_CONFIG: a DNS name or IPv4
// address, or a bracketed IPv6 address ("[::1]:29500"), and a port 1..65535.
#include "abi/error.h"
#include "context/cluster.h"
#include "context/options.h"

namespace hb {
namespace {

// A host name is at most 253 characters (RFC 1035), a port five digits.
constexpr size_t kMaxHostPort = 253 + 2 + 1 + 5;

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
}

bool ipv6_char(char c) {
  return (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
         (c >= '0' && c <= '9') || c == ':' || c == '.';
}

}  // namespace

void split_host_port(const std::string &addr, const char *what,
                     std::string *host, int *port) {
  if (addr.size() > kMaxHostPort)
    fail(HB_ERR_CONFIG,
         "%s=%s: longer than %zu bytes, the most a host:port can be", what,
         quote_value(addr).c_str(), kMaxHostPort);
  size_t colon = addr.rfind(':');
  if (colon == std::string::npos || colon == 0)
    fail(HB_ERR_CONFIG, "%s=%s: expected host:port", what,
         quote_value(addr).c_str());
  std::string h = addr.substr(0, colon);
  std::string p = addr.substr(colon + 1);
  bool ok_host;
  if (h.front() == '[') {
    ok_host = h.size() > 2 && h.back() == ']';
    for (size_t i = 1; ok_host && i + 1 < h.size(); ++i)
      ok_host = ipv6_char(h[i]);
    if (ok_host) h = h.substr(1, h.size() - 2);
  } else {
    ok_host = true;
    for (char c : h) ok_host = ok_host && name_char(c);
  }
  if (!ok_host)
    fail(HB_ERR_CONFIG,
         "%s=%s: bad host '%s' (a name, an IPv4 address or [IPv6])", what,
         quote_value(addr).c_str(), h.c_str());
  bool digits = !p.empty() && p.size() <= 5;
  for (char c : p) digits = digits && c >= '0' && c <= '9';
  int v = digits ? std::stoi(p) : 0;
  if (!digits || v < 1 || v > 65535)
    fail(HB_ERR_CONFIG, "%s=%s: bad port '%s' (1..65535)", what,
         quote_value(addr).c_str(), p.c_str());
  if (host) *host = h;
  if (port) *port = v;
}

}  // namespace hb
