#include "context/address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "abi/error.h"
#include "context/cluster.h"
#include "context/options.h"

namespace hb {
namespace {

std::string numeric_host(const sockaddr *sa) {
  char buf[INET6_ADDRSTRLEN] = {0};
  const void *where =
      sa->sa_family == AF_INET
          ? static_cast<const void *>(
                &reinterpret_cast<const sockaddr_in *>(sa)->sin_addr)
          : static_cast<const void *>(
                &reinterpret_cast<const sockaddr_in6 *>(sa)->sin6_addr);
  return inet_ntop(sa->sa_family, where, buf, sizeof buf) ? buf : "";
}

// A link-local IPv6 address needs a scope id that peers cannot share.
bool usable(const Interface &i) {
  return !(i.ipv6 && i.address.rfind("fe80:", 0) == 0);
}

std::vector<Interface> ipv4_first(std::vector<Interface> list) {
  std::vector<Interface> out;
  for (int pass = 0; pass < 2; ++pass)
    for (const Interface &i : list)
      if (i.ipv6 == (pass == 1)) out.push_back(i);
  return out;
}

std::string interface_names(const std::vector<Interface> &all) {
  std::string names;
  for (const Interface &i : all)
    names += (names.empty() ? "" : ", ") + i.name + " " + i.address;
  return names.empty() ? "none" : names;
}

bool everyone_here(const ClusterInfo &c) {
  return c.local_world_size >= c.world_size;
}

}  // namespace

std::vector<Interface> list_interfaces() {
  std::vector<Interface> out;
  ifaddrs *list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs *a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || !(a->ifa_flags & IFF_UP)) continue;
    int family = a->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    Interface i;
    i.name = a->ifa_name ? a->ifa_name : "";
    i.address = numeric_host(a->ifa_addr);
    i.ipv6 = family == AF_INET6;
    i.loopback =
        (a->ifa_flags & IFF_LOOPBACK) || is_loopback_address(i.address);
    if (!i.address.empty() && usable(i)) out.push_back(i);
  }
  freeifaddrs(list);
  return out;
}

std::string route_source(const std::string &host) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  if (getaddrinfo(host.c_str(), "9", &hints, &res) != 0 || !res) return "";
  std::string out;
  for (addrinfo *r = res; r && out.empty(); r = r->ai_next) {
    // Connecting a UDP socket sends nothing; it only asks the kernel for the
    // route, whose source address getsockname() then reports.
    int fd = socket(r->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    if (connect(fd, r->ai_addr, r->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr *>(&local), &len) == 0)
      out = numeric_host(reinterpret_cast<sockaddr *>(&local));
    close(fd);
  }
  freeaddrinfo(res);
  return out;
}

bool is_loopback_address(const std::string &address) {
  in_addr v4;
  in6_addr v6;
  if (inet_pton(AF_INET, address.c_str(), &v4) == 1)
    return (ntohl(v4.s_addr) >> 24) == 127;
  if (inet_pton(AF_INET6, address.c_str(), &v6) != 1) return false;
  if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
  return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
}

bool is_loopback_name(const std::string &host) {
  return host == "localhost" || is_loopback_address(host);
}

std::vector<Interface> match_interfaces(const std::vector<Interface> &all,
                                        const std::string &spec) {
  std::string list = spec;
  bool exclude = !list.empty() && list[0] == '^';
  if (exclude) list.erase(0, 1);
  bool exact = !list.empty() && list[0] == '=';
  if (exact) list.erase(0, 1);
  std::vector<std::string> names;
  for (size_t start = 0; start <= list.size();) {
    size_t comma = std::min(list.find(',', start), list.size());
    if (comma > start) names.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  std::vector<Interface> out;
  for (const Interface &i : all) {
    bool hit = false;
    for (const std::string &n : names)
      hit = hit || (exact ? i.name == n : i.name.rfind(n, 0) == 0);
    if (hit != exclude) out.push_back(i);
  }
  return ipv4_first(out);
}

AddressChoice choose_address(const ClusterInfo &c, const Options &o,
                             const NetworkView &net) {
  std::string explicit_host = o.get_string("cpu_host");
  if (!explicit_host.empty()) return {explicit_host, "HB_CPU_HOST (cpu_host)"};

  std::string ifname = o.get_string("socket_ifname");
  if (!ifname.empty()) {
    std::vector<Interface> all = net.interfaces();
    std::vector<Interface> hits = match_interfaces(all, ifname);
    if (hits.empty())
      fail(HB_ERR_CONFIG,
           "HB_SOCKET_IFNAME=%s matches no interface that is up with an "
           "address (interfaces: %s)",
           quote_value(ifname).c_str(), interface_names(all).c_str());
    return {hits[0].address,
            "interface " + hits[0].name + " (HB_SOCKET_IFNAME=" + ifname + ")"};
  }

  std::string rv_host;
  if (!c.rendezvous.empty())
    split_host_port(c.rendezvous, "rendezvous", &rv_host, nullptr);
  bool v6_loopback = rv_host == "::1";
  // Every peer reaches the store on loopback: they are all here.
  if (is_loopback_name(rv_host) && everyone_here(c))
    return {v6_loopback ? "::1" : "127.0.0.1",
            "the rendezvous " + c.rendezvous + " is on loopback"};

  std::string routed = rv_host.empty() ? "" : net.route(rv_host);
  if (!routed.empty() && !is_loopback_address(routed))
    return {routed, "the route to the rendezvous host " + rv_host};

  // The rendezvous host is this host's loopback (e.g. a hostname that
  // /etc/hosts maps to 127.0.1.1) or does not resolve: peers elsewhere
  // still need a real interface.
  std::vector<Interface> all = net.interfaces();
  std::vector<Interface> others = match_interfaces(all, "^docker,lo");
  for (const Interface &i : others)
    if (!i.loopback)
      return {i.address, "interface " + i.name + " (the rendezvous host " +
                             rv_host + " routes over loopback)"};
  // A peer that reaches the store on loopback is on this host, whatever
  // the local world size says.
  if (everyone_here(c) || is_loopback_name(rv_host))
    return {v6_loopback ? "::1" : "127.0.0.1",
            "no interface but loopback, and every rank is on this host"};
  fail(HB_ERR_CONFIG,
       "rank %d of %d: ranks on other hosts (local world %d) need an address "
       "to reach this one, but the rendezvous host %s routes over loopback and "
       "no other interface is up (interfaces: %s); set HB_SOCKET_IFNAME or "
       "HB_CPU_HOST",
       c.rank, c.world_size, c.local_world_size, rv_host.c_str(),
       interface_names(all).c_str());
}

}  // namespace hb
