#include <gtest/gtest.h>

#include <map>
#include <string>

#include "abi/error.h"
#include "context/cluster.h"
#include "context/options.h"
#include "env_guard.h"
#include "hb.h"

namespace {

using hb::ClusterInfo;

ClusterInfo discover(const hb_context_options *opts = nullptr) {
  return hb::discover_cluster(opts, hb::Options::from_environment());
}

// Discovery must fail with HB_ERR_CONFIG and a message containing text.
void expect_config_error(const std::string &text,
                         const hb_context_options *opts = nullptr) {
  hb_status st = hb::guard([&] { discover(opts); });
  EXPECT_EQ(st, HB_ERR_CONFIG) << hb_last_error();
  EXPECT_NE(std::string(hb_last_error()).find(text), std::string::npos)
      << "message: " << hb_last_error() << "\nexpected to contain: " << text;
}

TEST(Cluster, DefaultIsAWorldOfOne) {
  hb_test::EnvGuard env;
  ClusterInfo c = discover();
  EXPECT_EQ(c.rank, 0);
  EXPECT_EQ(c.world_size, 1);
  EXPECT_EQ(c.local_rank, 0);
  EXPECT_EQ(c.local_world_size, 1);
  EXPECT_EQ(c.task_type, "worker");
  EXPECT_EQ(c.task_id, 0);
  EXPECT_TRUE(c.in_world);
  EXPECT_TRUE(c.rendezvous.empty());
  EXPECT_FALSE(c.launcher_serves);
  EXPECT_EQ(c.source, "default");
  env.set("TF_CONFIG", "  \n");  // blank counts as unset
  EXPECT_EQ(discover().source, "default");
}

TEST(Cluster, LauncherVariables) {
  hb_test::EnvGuard env;
  env.set("HB_RANK", "2");
  env.set("HB_WORLD_SIZE", "4");
  env.set("HB_RENDEZVOUS", "127.0.0.1:29500");
  ClusterInfo c = discover();
  EXPECT_EQ(c.rank, 2);
  EXPECT_EQ(c.world_size, 4);
  EXPECT_EQ(c.local_rank, 2) << "no local layout: one host assumed";
  EXPECT_EQ(c.local_world_size, 4);
  EXPECT_EQ(c.task_type, "worker");
  EXPECT_EQ(c.task_id, 2);
  EXPECT_EQ(c.rendezvous, "127.0.0.1:29500");
  EXPECT_EQ(c.source, "env");
  EXPECT_FALSE(c.launcher_serves);

  env.set("HB_LOCAL_RANK", "0");
  env.set("HB_LOCAL_WORLD_SIZE", "2");
  env.set("HB_RENDEZVOUS_SERVED", "1");
  c = discover();
  EXPECT_EQ(c.local_rank, 0);
  EXPECT_EQ(c.local_world_size, 2);
  EXPECT_TRUE(c.launcher_serves);

  // A world of one needs no rendezvous.
  hb_test::EnvGuard env2;
  env2.set("HB_RANK", "0");
  env2.set("HB_WORLD_SIZE", "1");
  c = discover();
  EXPECT_EQ(c.world_size, 1);
  EXPECT_EQ(c.source, "env");
}

TEST(Cluster, MalformedLauncherVariablesNameTheVariable) {
  hb_test::EnvGuard env;
  env.set("HB_RENDEZVOUS", "127.0.0.1:29500");
  env.set("HB_WORLD_SIZE", "4");
  env.set("HB_RANK", "abc");
  expect_config_error("HB_RANK='abc': not an integer");
  env.set("HB_RANK", "4");
  expect_config_error("HB_RANK=4 out of range: HB_WORLD_SIZE is 4");
  env.set("HB_RANK", "-1");
  expect_config_error("HB_RANK='-1': out of range [0, 65535]");
  env.set("HB_RANK", "1");
  env.set("HB_WORLD_SIZE", "0");
  expect_config_error("HB_WORLD_SIZE='0': out of range [1, 65536]");
  env.set("HB_WORLD_SIZE", "4x");
  expect_config_error("HB_WORLD_SIZE='4x': not an integer");
  env.unset("HB_WORLD_SIZE");
  expect_config_error("HB_RANK is set but HB_WORLD_SIZE is not");
  env.set("HB_WORLD_SIZE", "4");
  env.unset("HB_RANK");
  expect_config_error("HB_WORLD_SIZE is set but HB_RANK is not");
  env.set("HB_RANK", "1");

  env.set("HB_LOCAL_RANK", "1");
  expect_config_error("HB_LOCAL_RANK is set but HB_LOCAL_WORLD_SIZE is not");
  env.set("HB_LOCAL_WORLD_SIZE", "1");
  expect_config_error("HB_LOCAL_RANK=1 out of range: HB_LOCAL_WORLD_SIZE is 1");
  env.set("HB_LOCAL_WORLD_SIZE", "8");
  expect_config_error("HB_LOCAL_WORLD_SIZE=8 exceeds HB_WORLD_SIZE=4");
  env.unset("HB_LOCAL_RANK");
  env.unset("HB_LOCAL_WORLD_SIZE");

  env.set("HB_RENDEZVOUS_SERVED", "sure");
  expect_config_error("HB_RENDEZVOUS_SERVED='sure': not a boolean");
  env.unset("HB_RENDEZVOUS_SERVED");

  env.set("HB_RENDEZVOUS", "nohost");
  expect_config_error("HB_RENDEZVOUS='nohost': expected host:port");
  env.set("HB_RENDEZVOUS", "h:99999");
  expect_config_error("HB_RENDEZVOUS='h:99999': bad port '99999'");
  env.unset("HB_RENDEZVOUS");
  expect_config_error(
      "HB_WORLD_SIZE is 4 but no rendezvous address is given: set "
      "HB_RENDEZVOUS=host:port");
}

TEST(Cluster, ExplicitOptionsComeFirst) {
  hb_test::EnvGuard env;
  env.set("HB_RANK", "0");
  env.set("HB_WORLD_SIZE", "3");
  env.set("HB_RENDEZVOUS", "127.0.0.1:1000");
  env.set("TF_CONFIG",
          R"({"cluster":{"worker":["a:1"]},"task":{"type":"worker"}})");
  hb_context_options o = HB_CONTEXT_OPTIONS_INIT;
  o.rank = 1;
  o.world_size = 2;
  o.local_rank = 0;
  o.local_world_size = 1;
  o.rendezvous = "10.1.1.1:2000";
  ClusterInfo c = discover(&o);
  EXPECT_EQ(c.rank, 1);
  EXPECT_EQ(c.world_size, 2);
  EXPECT_EQ(c.local_rank, 0);
  EXPECT_EQ(c.local_world_size, 1);
  EXPECT_EQ(c.rendezvous, "10.1.1.1:2000");
  EXPECT_EQ(c.source, "options");

  // Field by field: an explicit world size with the rank from HB_RANK.
  o = HB_CONTEXT_OPTIONS_INIT;
  o.world_size = 5;
  c = discover(&o);
  EXPECT_EQ(c.rank, 0);
  EXPECT_EQ(c.world_size, 5);
  EXPECT_EQ(c.rendezvous, "127.0.0.1:1000");
  EXPECT_EQ(c.source, "options");

  o.rank = 7;
  expect_config_error(
      "hb_context_options.rank=7 out of range: hb_context_options.world_size "
      "is 5",
      &o);
  o.rank = -3;
  expect_config_error(
      "hb_context_options.rank=-3: out of range [0, 65535] (-1: discover)", &o);
  o.rank = 1;
  o.rendezvous = "bad";
  expect_config_error("hb_context_options.rendezvous='bad': expected host:port",
                      &o);
  o.rendezvous = nullptr;
  o.world_size = -2;
  expect_config_error("hb_context_options.world_size=-2: out of range", &o);
}

TEST(Cluster, LauncherVariablesBeatTfConfig) {
  hb_test::EnvGuard env;
  env.set("TF_CONFIG", "this is not json");
  env.set("HB_RANK", "0");
  env.set("HB_WORLD_SIZE", "1");
  EXPECT_EQ(discover().source, "env") << "TF_CONFIG must not even be read";
}

TEST(Cluster, TfConfigRolesAndLocalRanks) {
  hb_test::EnvGuard env;
  // Hosts: chief on a, workers on b, a, b, a.
  const std::string cluster =
      R"("cluster":{"chief":["a:1"],"worker":["b:1","a:2","b:2","a:3"],)"
      R"("ps":["p:1","p:2"]})";
  auto set_task = [&](const char *type, int index) {
    env.set("TF_CONFIG", "{" + cluster + R"(,"task":{"type":")" + type +
                             R"(","index":)" + std::to_string(index) + "}}");
  };
  set_task("chief", 0);
  ClusterInfo c = discover();
  EXPECT_EQ(c.source, "tf_config");
  EXPECT_EQ(c.rank, 0);
  EXPECT_EQ(c.world_size, 5);
  EXPECT_EQ(c.task_type, "chief");
  EXPECT_EQ(c.task_id, 0);
  EXPECT_EQ(c.local_rank, 0);
  EXPECT_EQ(c.local_world_size, 3);
  EXPECT_EQ(c.rendezvous, "a:1");
  EXPECT_TRUE(c.in_world);

  set_task("worker", 3);  // a:3, rank 4, third on host a
  c = discover();
  EXPECT_EQ(c.rank, 4);
  EXPECT_EQ(c.task_type, "worker");
  EXPECT_EQ(c.task_id, 3);
  EXPECT_EQ(c.local_rank, 2);
  EXPECT_EQ(c.local_world_size, 3);
  EXPECT_EQ(c.rendezvous, "a:1");

  set_task("worker", 2);  // b:2, rank 3, second on host b
  c = discover();
  EXPECT_EQ(c.rank, 3);
  EXPECT_EQ(c.local_rank, 1);
  EXPECT_EQ(c.local_world_size, 2);

  set_task("ps", 1);
  c = discover();
  EXPECT_FALSE(c.in_world);
  EXPECT_EQ(c.task_type, "ps");
  EXPECT_EQ(c.task_id, 1);
  EXPECT_EQ(c.world_size, 1);
  EXPECT_TRUE(c.rendezvous.empty());

  set_task("evaluator", 0);
  c = discover();
  EXPECT_FALSE(c.in_world);
  EXPECT_EQ(c.task_type, "evaluator");

  // HB_RENDEZVOUS overrides the chief's address.
  set_task("worker", 0);
  env.set("HB_RENDEZVOUS", "10.0.0.9:7000");
  EXPECT_EQ(discover().rendezvous, "10.0.0.9:7000");
  env.set("HB_RENDEZVOUS_SERVED", "yes");
  EXPECT_TRUE(discover().launcher_serves);
}

TEST(Cluster, TfConfigWithoutChief) {
  hb_test::EnvGuard env;
  env.set(
      "TF_CONFIG",
      R"({"cluster":{"worker":["w0:1","w1:1"]},"task":{"type":"worker","index":1}})");
  ClusterInfo c = discover();
  EXPECT_EQ(c.rank, 1);
  EXPECT_EQ(c.world_size, 2);
  EXPECT_EQ(c.rendezvous, "w0:1") << "worker 0 stands in for the chief";
}

TEST(Cluster, BadTfConfigIsAConfigError) {
  hb_test::EnvGuard env;
  env.set(
      "TF_CONFIG",
      R"({"cluster":{"worker":["w0:1"]},"task":{"type":"worker","index":3}})");
  expect_config_error(
      "TF_CONFIG: task.index 3 out of range: cluster.worker has 1 entry");
  env.set("TF_CONFIG", "{");
  expect_config_error("TF_CONFIG is not valid JSON");
}

TEST(Cluster, SplitHostPort) {
  std::string host;
  int port = 0;
  hb::split_host_port("example.com:80", "x", &host, &port);
  EXPECT_EQ(host, "example.com");
  EXPECT_EQ(port, 80);
  hb::split_host_port("[fe80::1]:65535", "x", &host, &port);
  EXPECT_EQ(host, "fe80::1");
  EXPECT_EQ(port, 65535);
  hb::split_host_port("10.0.0.1:1", "x", &host, &port);
  EXPECT_EQ(host, "10.0.0.1");
  EXPECT_EQ(port, 1);
  EXPECT_EQ(
      hb::guard([] { hb::split_host_port("h:1:2", "X", nullptr, nullptr); }),
      HB_ERR_CONFIG);
  EXPECT_NE(std::string(hb_last_error()).find("X='h:1:2': bad host 'h:1'"),
            std::string::npos)
      << hb_last_error();
}

// Entry i of ps_hosts is ps task i: an empty entry is refused, not dropped
// (dropping renumbers the ps tasks).
TEST(Cluster, EmptyPsHostsEntryIsAConfigError) {
  EXPECT_EQ(hb::parse_ps_hosts("a:1,b:2").size(), 2u);
  EXPECT_TRUE(hb::parse_ps_hosts("").empty());
  for (const char *bad : {"a:1,,b:2", "a:1,b:2,", ",a:1"}) {
    hb_test::EnvGuard env;
    env.set("HB_PS_HOSTS", bad);
    expect_config_error(std::string("ps_hosts (HB_PS_HOSTS)='") + bad +
                        "': entry ");
  }
  EXPECT_EQ(hb::guard([] { hb::parse_ps_hosts("a:1,,b:2"); }), HB_ERR_CONFIG);
  EXPECT_NE(std::string(hb_last_error()).find("entry 1 is empty"),
            std::string::npos)
      << hb_last_error();
}

// Other launchers: after HB_*, before TF_CONFIG, in the documented order.
namespace launchers {

using Vars = std::map<std::string, std::string>;

ClusterInfo discover_with(const Vars &vars) {
  hb_test::EnvGuard env;
  for (const auto &kv : vars) env.set(kv.first, kv.second);
  return discover();
}

void expect_identity(const ClusterInfo &c, const char *source, int rank,
                     int world, int local_rank, int local_world) {
  EXPECT_EQ(c.source, source);
  EXPECT_EQ(c.rank, rank) << source;
  EXPECT_EQ(c.world_size, world) << source;
  EXPECT_EQ(c.local_rank, local_rank) << source;
  EXPECT_EQ(c.local_world_size, local_world) << source;
  EXPECT_EQ(c.task_id, rank) << source;
  EXPECT_FALSE(c.launcher_serves) << source << ": rank 0 serves the store";
}

TEST(ClusterLaunchers, Torchrun) {
  ClusterInfo c = discover_with({{"RANK", "3"},
                                 {"WORLD_SIZE", "4"},
                                 {"LOCAL_RANK", "1"},
                                 {"LOCAL_WORLD_SIZE", "2"},
                                 {"MASTER_ADDR", "10.0.0.1"},
                                 {"MASTER_PORT", "29500"}});
  expect_identity(c, "torchrun", 3, 4, 1, 2);
  EXPECT_EQ(c.rendezvous, "10.0.0.1:29501")
      << "MASTER_PORT is the framework's store; hb's is the next port";
  // IPv6 MASTER_ADDR gets brackets.
  c = discover_with({{"RANK", "0"},
                     {"WORLD_SIZE", "2"},
                     {"MASTER_ADDR", "fd00::1"},
                     {"MASTER_PORT", "80"}});
  EXPECT_EQ(c.rendezvous, "[fd00::1]:81");
}

TEST(ClusterLaunchers, OpenMpiSlurmPmi) {
  ClusterInfo c = discover_with({{"OMPI_COMM_WORLD_RANK", "2"},
                                 {"OMPI_COMM_WORLD_SIZE", "3"},
                                 {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                                 {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"},
                                 {"HB_RENDEZVOUS", "127.0.0.1:7000"}});
  expect_identity(c, "openmpi", 2, 3, 2, 3);
  EXPECT_EQ(c.rendezvous, "127.0.0.1:7000") << "HB_RENDEZVOUS beats MASTER_*";

  // Slurm: the local size comes from the compressed tasks-per-node list.
  c = discover_with({{"SLURM_PROCID", "5"},
                     {"SLURM_NTASKS", "7"},
                     {"SLURM_LOCALID", "1"},
                     {"SLURM_NODEID", "2"},
                     {"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"},
                     {"SLURM_TASKS_PER_NODE", "9"},
                     {"MASTER_ADDR", "node01"},
                     {"MASTER_PORT", "12000"}});
  expect_identity(c, "slurm", 5, 7, 1, 2);
  EXPECT_EQ(c.rendezvous, "node01:12001");
  c = discover_with({{"SLURM_PROCID", "6"},
                     {"SLURM_NTASKS", "7"},
                     {"SLURM_LOCALID", "0"},
                     {"SLURM_NODEID", "3"},
                     {"SLURM_TASKS_PER_NODE", "2(x3),1"},
                     {"HB_RENDEZVOUS", "node01:12001"}});
  expect_identity(c, "slurm", 6, 7, 0, 1);

  c = discover_with({{"PMI_RANK", "1"},
                     {"PMI_SIZE", "2"},
                     {"MPI_LOCALRANKID", "0"},
                     {"MPI_LOCALNRANKS", "1"},
                     {"HB_RENDEZVOUS", "h0:1"}});
  expect_identity(c, "pmi", 1, 2, 0, 1);
}

TEST(ClusterLaunchers, Order) {
  Vars all = {{"HB_RANK", "0"},
              {"HB_WORLD_SIZE", "6"},
              {"RANK", "1"},
              {"WORLD_SIZE", "5"},
              {"OMPI_COMM_WORLD_RANK", "2"},
              {"OMPI_COMM_WORLD_SIZE", "4"},
              {"SLURM_PROCID", "1"},
              {"SLURM_NTASKS", "3"},
              {"PMI_RANK", "0"},
              {"PMI_SIZE", "2"},
              {"HB_RENDEZVOUS", "h:1"},
              {"TF_CONFIG",
               R"({"cluster":{"worker":["a:1"]},"task":{"type":"worker"}})"}};
  const char *order[][3] = {
      {"HB_RANK", "HB_WORLD_SIZE", "env"},
      {"RANK", "WORLD_SIZE", "torchrun"},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "openmpi"},
      {"SLURM_PROCID", "SLURM_NTASKS", "slurm"},
      {"PMI_RANK", "PMI_SIZE", "pmi"}};
  int world = 6;
  for (const auto &step : order) {
    ClusterInfo c = discover_with(all);
    EXPECT_EQ(c.source, step[2]);
    EXPECT_EQ(c.world_size, world--);
    all.erase(step[0]);
    all.erase(step[1]);
  }
  EXPECT_EQ(discover_with(all).source, "tf_config");
  all.erase("TF_CONFIG");
  EXPECT_EQ(discover_with(all).source, "default");

  // Explicit options beat every launcher.
  hb_test::EnvGuard env;
  env.set("RANK", "1");
  env.set("WORLD_SIZE", "3");
  hb_context_options o = HB_CONTEXT_OPTIONS_INIT;
  o.rank = 0;
  o.world_size = 1;
  ClusterInfo c = discover(&o);
  EXPECT_EQ(c.source, "options");
  EXPECT_EQ(c.world_size, 1);
}

// Never a silent world of one: a larger world without a rendezvous is an
// error naming what was seen.
TEST(ClusterLaunchers, NoRendezvousIsAnErrorNamingTheVariables) {
  hb_test::EnvGuard env;
  env.set("OMPI_COMM_WORLD_RANK", "1");
  env.set("OMPI_COMM_WORLD_SIZE", "3");
  env.set("OMPI_COMM_WORLD_LOCAL_RANK", "1");
  env.set("OMPI_COMM_WORLD_LOCAL_SIZE", "3");
  expect_config_error(
      "OMPI_COMM_WORLD_SIZE is 3 but no rendezvous address is given: set "
      "HB_RENDEZVOUS=host:port (or hb_context_options.rendezvous, or "
      "MASTER_ADDR and MASTER_PORT); variables seen: "
      "OMPI_COMM_WORLD_RANK='1', OMPI_COMM_WORLD_SIZE='3'");
  env.set("MASTER_ADDR", "h");
  expect_config_error("MASTER_ADDR is set but MASTER_PORT is not");
  env.set("MASTER_PORT", "65535");
  expect_config_error("MASTER_PORT='65535': out of range [1, 65534]");
}

TEST(ClusterLaunchers, AWorldOfOneNeedsNoRendezvous) {
  expect_identity(discover_with({{"OMPI_COMM_WORLD_RANK", "0"},
                                 {"OMPI_COMM_WORLD_SIZE", "1"}}),
                  "openmpi", 0, 1, 0, 1);
}

TEST(ClusterLaunchers, HalfALauncherIsAnError) {
  hb_test::EnvGuard env;
  env.set("WORLD_SIZE", "2");
  expect_config_error("WORLD_SIZE is set but RANK is not");
  env.unset("WORLD_SIZE");
  env.set("SLURM_PROCID", "0");
  expect_config_error("SLURM_PROCID is set but SLURM_NTASKS is not");
  env.set("SLURM_NTASKS", "2");
  env.set("HB_RENDEZVOUS", "h:1");
  env.set("SLURM_LOCALID", "0");
  expect_config_error(
      "SLURM_LOCALID is set but SLURM_STEP_TASKS_PER_NODE is not");
  env.set("SLURM_NODEID", "4");
  env.set("SLURM_TASKS_PER_NODE", "1(x2)");
  expect_config_error(
      "SLURM_TASKS_PER_NODE='1(x2)' has no count for SLURM_NODEID=4");
  env.set("SLURM_TASKS_PER_NODE", "1(x2147483647),1(x2147483647)");
  expect_config_error("has no count for SLURM_NODEID=4");
  env.set("SLURM_TASKS_PER_NODE", "x");
  expect_config_error("SLURM_TASKS_PER_NODE='x' has no count");
  env.set("RANK", "x");
  expect_config_error("RANK='x': not an integer");
}

}  // namespace launchers
}  // namespace
