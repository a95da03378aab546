// The address a rank gives its peers (context/address.h), decided over a
// fake view of the machine's interfaces and routes, plus the real ones.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "abi/error.h"
#include "context/address.h"
#include "context/cluster.h"
#include "context/options.h"
#include "env_guard.h"

namespace {

using hb::Interface;

const std::vector<Interface> kMachine = {
    {"lo", "127.0.0.1", false, true},
    {"docker0", "172.17.0.1", false, false},
    {"eth0", "fd00::5", true, false},
    {"eth0", "10.1.2.3", false, false},
    {"ib0", "192.168.9.9", false, false},
};

hb::ClusterInfo cluster(int world, int local_world, const std::string &rv) {
  hb::ClusterInfo c;
  c.rank = 1;
  c.world_size = world;
  c.local_world_size = local_world;
  c.rendezvous = rv;
  return c;
}

// Routes: the test network via ib0, this host's name via loopback.
hb::NetworkView view(std::vector<Interface> interfaces = kMachine) {
  hb::NetworkView v;
  v.interfaces = [interfaces] { return interfaces; };
  v.route = [](const std::string &host) -> std::string {
    if (host == "peerhost" || host == "192.168.9.1") return "192.168.9.9";
    if (host == "myname" || host == "localhost") return "127.0.1.1";
    return "";  // does not resolve
  };
  return v;
}

std::string choose(const hb::ClusterInfo &c, const hb::NetworkView &v = view(),
                   const std::string &options = "") {
  hb::Options o = hb::Options::from_environment();
  if (!options.empty()) o.apply_list(options);
  return hb::choose_address(c, o, v).address;
}

TEST(Address, MatchInterfacesLikeNcclSocketIfname) {
  auto names = [](const std::vector<Interface> &list) {
    std::string s;
    for (const auto &i : list) s += i.name + "=" + i.address + " ";
    return s;
  };
  EXPECT_EQ(names(hb::match_interfaces(kMachine, "eth")),
            "eth0=10.1.2.3 eth0=fd00::5 ");  // IPv4 first
  EXPECT_EQ(names(hb::match_interfaces(kMachine, "ib,docker")),
            "docker0=172.17.0.1 ib0=192.168.9.9 ");
  EXPECT_EQ(names(hb::match_interfaces(kMachine, "=eth")), "");
  EXPECT_EQ(names(hb::match_interfaces(kMachine, "=ib0")), "ib0=192.168.9.9 ");
  EXPECT_EQ(names(hb::match_interfaces(kMachine, "^docker,lo,eth")),
            "ib0=192.168.9.9 ");
}

TEST(Address, LoopbackRecognised) {
  for (const char *a : {"127.0.0.1", "127.0.1.1", "::1", "::ffff:127.0.0.1"})
    EXPECT_TRUE(hb::is_loopback_address(a)) << a;
  for (const char *a : {"10.0.0.1", "fd00::1", "::ffff:10.0.0.1", "name"})
    EXPECT_FALSE(hb::is_loopback_address(a)) << a;
  EXPECT_TRUE(hb::is_loopback_name("localhost"));
  EXPECT_FALSE(hb::is_loopback_name("myname"));
}

TEST(Address, OrderOfChoice) {
  hb_test::EnvGuard env;
  // Explicit cpu_host wins over everything; then socket_ifname.
  EXPECT_EQ(choose(cluster(4, 2, "peerhost:1"), view(), "cpu_host=h.example"),
            "h.example");
  EXPECT_EQ(choose(cluster(4, 2, "peerhost:1"), view(), "socket_ifname=eth"),
            "10.1.2.3");
  // A loopback rendezvous with every rank here: loopback.
  EXPECT_EQ(choose(cluster(4, 4, "127.0.0.1:1")), "127.0.0.1");
  EXPECT_EQ(choose(cluster(4, 4, "[::1]:1")), "::1");
  // The route to the rendezvous host.
  EXPECT_EQ(choose(cluster(4, 2, "peerhost:1")), "192.168.9.9");
  EXPECT_EQ(choose(cluster(4, 4, "192.168.9.1:1")), "192.168.9.9");
  // The host's own name maps to loopback (Debian's 127.0.1.1), or the name
  // does not resolve: the first interface other than lo and docker.
  EXPECT_EQ(choose(cluster(4, 2, "myname:1")), "10.1.2.3");
  EXPECT_EQ(choose(cluster(4, 4, "nowhere:1")), "10.1.2.3");
  // A loopback rendezvous but peers said to be elsewhere: a real interface.
  EXPECT_EQ(choose(cluster(4, 2, "127.0.0.1:1")), "10.1.2.3");
}

TEST(Address, OnlyLoopback) {
  hb_test::EnvGuard env;
  hb::NetworkView lo_only = view({{"lo", "127.0.0.1", false, true}});
  // Every rank here (or reaching the store on loopback): fine.
  EXPECT_EQ(choose(cluster(2, 2, "myname:1"), lo_only), "127.0.0.1");
  EXPECT_EQ(choose(cluster(2, 1, "127.0.0.1:1"), lo_only), "127.0.0.1");
  // Peers on other hosts and nothing to give them: a clear error.
  hb_status st = hb::guard([&] { choose(cluster(4, 2, "myname:1"), lo_only); });
  EXPECT_EQ(st, HB_ERR_CONFIG);
  EXPECT_NE(
      std::string(hb_last_error()).find("set HB_SOCKET_IFNAME or HB_CPU_HOST"),
      std::string::npos)
      << hb_last_error();
  st = hb::guard([&] {
    choose(cluster(4, 2, "peerhost:1"), view(), "socket_ifname=wlan");
  });
  EXPECT_EQ(st, HB_ERR_CONFIG);
  EXPECT_NE(std::string(hb_last_error())
                .find("HB_SOCKET_IFNAME='wlan' matches no interface"),
            std::string::npos)
      << hb_last_error();
}

// The real machine: loopback is listed and routes to itself.
TEST(Address, RealInterfacesAndRoutes) {
  bool has_lo = false;
  for (const Interface &i : hb::list_interfaces())
    has_lo = has_lo || (i.loopback && i.address == "127.0.0.1");
  EXPECT_TRUE(has_lo);
  EXPECT_EQ(hb::route_source("127.0.0.1"), "127.0.0.1");
}

}  // namespace
