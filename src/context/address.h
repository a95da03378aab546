// Which address a rank gives its peers for direct connections (the CPU
// transport listens there), chosen the way NCCL's bootstrap does: an
// explicit address, else an interface named by the user, else the
// interface that routes to the rendezvous server; never a loopback
// address when a peer may be on another host.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace hb {

struct ClusterInfo;
class Options;

struct Interface {
  std::string name;     // "eth0"
  std::string address;  // numeric, without brackets: "10.0.0.2", "fd00::2"
  bool ipv6 = false;
  bool loopback = false;
};

// The up interfaces with an address, in getifaddrs() order.
std::vector<Interface> list_interfaces();

// The local address the kernel would use to reach host (a name or a
// numeric address); empty when it does not resolve or has no route.
std::string route_source(const std::string &host);

// True for 127.0.0.0/8, ::1 and their IPv4-mapped forms.
bool is_loopback_address(const std::string &address);
// True for the names and literals that always mean this host's loopback.
bool is_loopback_name(const std::string &host);

// Interfaces that match an ifname spec, as NCCL_SOCKET_IFNAME: a comma
// list of name prefixes ("eth,ens"); "=" before the list makes them exact
// names, "^" makes them exclusions ("^docker,lo"). IPv4 addresses first.
std::vector<Interface> match_interfaces(const std::vector<Interface> &all,
                                        const std::string &spec);

struct AddressChoice {
  std::string address;  // what peers connect to
  std::string reason;   // for the info log: "route to the rendezvous ..."
};

// The machine's view, replaceable in tests.
struct NetworkView {
  std::function<std::vector<Interface>()> interfaces = list_interfaces;
  std::function<std::string(const std::string &)> route = route_source;
};

// In order: the cpu_host option; the first address of an interface that
// matches socket_ifname; 127.0.0.1 when the rendezvous is a loopback
// address and every rank is on this host; the source address of the route
// to the rendezvous host when that is not loopback; the first
// non-loopback interface; 127.0.0.1 when every rank is on this host (or
// reaches the store on loopback).
// Throws HB_ERR_CONFIG when socket_ifname matches nothing, or when peers
// on other hosts need an address and there is only loopback.
AddressChoice choose_address(const ClusterInfo &c, const Options &o,
                             const NetworkView &net = NetworkView());

}  // namespace hb
