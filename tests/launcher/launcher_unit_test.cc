// Unit tests of hbrun's pieces: command line, topology, worker environment
// and the line relay.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <thread>

#include "abi/error.h"
#include "common/free_port.h"
#include "launcher/job_file.h"
#include "launcher/launch_options.h"
#include "launcher/line_relay.h"
#include "launcher/root_cause.h"
#include "launcher/topology.h"

using namespace hb::launcher;

namespace {

LaunchOptions parse(std::vector<const char *> args) {
  args.insert(args.begin(), "hbrun");
  return parse_command_line(static_cast<int>(args.size()), args.data());
}

hb_status parse_status(std::vector<const char *> args) {
  return hb::guard([&] { parse(args); });
}

struct FakeEnv {
  std::map<std::string, std::string> vars;
  EnvLookup lookup() const {
    return [this](const char *n) -> const char * {
      auto it = vars.find(n);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

int no_gpus() { return 0; }

TEST(LaunchOptions, ParsesEveryOption) {
  LaunchOptions o = parse({"-n", "4", "--host=0.0.0.0", "--port", "1234",
                           "--timeout", "1.5", "--grace-ms=10", "--no-prefix",
                           "--no-tf-config", "-v", "--", "prog", "-n", "7"});
  EXPECT_EQ(o.nproc, 4);
  EXPECT_EQ(o.host, "0.0.0.0");
  EXPECT_EQ(o.port, 1234);
  EXPECT_EQ(o.timeout_ms, 1500);
  EXPECT_EQ(o.grace_ms, 10);
  EXPECT_FALSE(o.prefix);
  EXPECT_FALSE(o.use_tf_config);
  EXPECT_TRUE(o.verbose);
  EXPECT_EQ(o.command, (std::vector<std::string>{"prog", "-n", "7"}));
}

TEST(LaunchOptions, ProgramWithoutDashDash) {
  LaunchOptions o = parse({"--nproc", "2", "prog", "--flag"});
  EXPECT_EQ(o.nproc, 2);
  EXPECT_EQ(o.command, (std::vector<std::string>{"prog", "--flag"}));
}

TEST(LaunchOptions, RejectsBadValuesNamingTheOption) {
  for (auto args :
       std::vector<std::vector<const char *>>{{"-n", "0", "--", "p"},
                                              {"-n", "x", "--", "p"},
                                              {"-n"},
                                              {"--port", "70000", "--", "p"},
                                              {"--timeout", "-1", "--", "p"},
                                              {"--timeout", "nan", "--", "p"},
                                              {"--grace-ms", "1e3", "--", "p"},
                                              {"--what", "--", "p"},
                                              {"-n", "2", "--"}}) {
    EXPECT_EQ(parse_status(args), HB_ERR_INVALID_ARGUMENT) << args[0];
  }
  parse_status({"--timeout", "0", "--", "p"});
  EXPECT_NE(std::string(hb_last_error()).find("--timeout"), std::string::npos);
  EXPECT_EQ(parse_status({"-h"}), HB_OK);
}

TEST(Topology, VisibleGpus) {
  FakeEnv e;
  EXPECT_TRUE(visible_gpus(e.lookup(), no_gpus).empty());
  e.vars["CUDA_VISIBLE_DEVICES"] = "2,GPU-abc, 0";
  EXPECT_EQ(visible_gpus(e.lookup(), no_gpus),
            (std::vector<std::string>{"2", "GPU-abc", "0"}));
  e.vars["CUDA_VISIBLE_DEVICES"] = "1,-1,2";  // CUDA stops at -1
  EXPECT_EQ(visible_gpus(e.lookup(), no_gpus), (std::vector<std::string>{"1"}));
  e.vars["CUDA_VISIBLE_DEVICES"] = "";
  e.vars["NVIDIA_VISIBLE_DEVICES"] =
      "0,1";  // CUDA_VISIBLE_DEVICES wins, even empty
  EXPECT_TRUE(visible_gpus(e.lookup(), no_gpus).empty());
  e.vars.erase("CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(visible_gpus(e.lookup(), no_gpus),
            (std::vector<std::string>{"0", "1"}));
  e.vars["NVIDIA_VISIBLE_DEVICES"] = "all";
  EXPECT_EQ(visible_gpus(e.lookup(), [] { return 3; }),
            (std::vector<std::string>{"0", "1", "2"}));
  e.vars["NVIDIA_VISIBLE_DEVICES"] = "none";
  EXPECT_TRUE(visible_gpus(e.lookup(), [] { return 3; }).empty());
}

TEST(Topology, CountsNvidiaDeviceNodes) {
  char dir[] = "/tmp/hb_dev_XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  std::string d = dir;
  const char *names[] = {"nvidia0",    "nvidia1", "nvidia12", "nvidiactl",
                         "nvidia-uvm", "nvidia",  "null"};
  for (const char *name : names)
    ::close(::open((d + "/" + name).c_str(), O_CREAT | O_WRONLY, 0600));
  EXPECT_EQ(count_nvidia_device_nodes(d), 3);
  for (const char *name : names) ::unlink((d + "/" + name).c_str());
  ::rmdir(dir);
  EXPECT_EQ(count_nvidia_device_nodes(d), 0);  // gone: no error, no GPUs
}

TEST(Topology, SingleMachine) {
  FakeEnv e;
  LaunchOptions o;
  o.nproc = 3;
  Topology t = plan_topology(o, e.lookup(), no_gpus);
  EXPECT_EQ(t.world_size, 3);
  EXPECT_EQ(t.local_world_size, 3);
  ASSERT_EQ(t.workers.size(), 3u);
  EXPECT_EQ(t.workers[2].rank, 2);
  EXPECT_EQ(t.workers[2].label, "2");
  EXPECT_TRUE(t.serve);
  EXPECT_EQ(t.bind_host, "127.0.0.1");
  EXPECT_EQ(t.bind_port, 0);
  EXPECT_EQ(t.connect_port, 0);
  o.host = "0.0.0.0";
  o.port = 4000;
  t = plan_topology(o, e.lookup(), no_gpus);
  EXPECT_EQ(t.bind_host, "0.0.0.0");
  EXPECT_EQ(t.bind_port, 4000);
  EXPECT_EQ(t.connect_host, "127.0.0.1");
}

TEST(Topology, NoWorkersIsAConfigError) {
  FakeEnv e;
  LaunchOptions o;
  EXPECT_EQ(hb::guard([&] { plan_topology(o, e.lookup(), no_gpus); }),
            HB_ERR_CONFIG);
  EXPECT_NE(std::string(hb_last_error()).find("-n N"), std::string::npos);
}

TEST(Topology, TfConfigChiefServesOnItsAddress) {
  FakeEnv e;
  e.vars["TF_CONFIG"] =
      R"({"cluster": {"chief": ["c:7000"], "worker": ["w0:7001"]}, "task": {"type": "chief", "index": 0}})";
  e.vars["CUDA_VISIBLE_DEVICES"] = "0,1";
  LaunchOptions o;
  Topology t = plan_topology(o, e.lookup(), no_gpus);
  EXPECT_EQ(t.world_size, 4);
  ASSERT_EQ(t.workers.size(), 2u);
  EXPECT_EQ(t.workers[0].rank, 0);
  EXPECT_EQ(t.workers[1].rank, 1);
  EXPECT_EQ(t.workers[1].cuda_device, "1");
  EXPECT_TRUE(t.serve);
  EXPECT_EQ(t.bind_host, "0.0.0.0");
  EXPECT_EQ(t.bind_port, 7000);
  EXPECT_EQ(t.connect_host, "c");
  EXPECT_EQ(t.connect_port, 7000);
  EXPECT_EQ(t.master_port, 7001) << "every host derives the same MASTER_PORT";
  o.port = 7100;
  o.host = "10.0.0.1";
  t = plan_topology(o, e.lookup(), no_gpus);
  EXPECT_EQ(t.bind_host, "10.0.0.1");
  EXPECT_EQ(t.bind_port, 7100);
  EXPECT_EQ(t.connect_port, 7100);
}

TEST(Topology, TfConfigWithoutChiefStartsAtWorkerZero) {
  FakeEnv e;
  e.vars["TF_CONFIG"] =
      R"({"cluster": {"worker": ["w0:7001", "w1:7002", "w2:7003"]}, "task": {"type": "worker", "index": 2}})";
  LaunchOptions o;
  o.nproc = 1;
  Topology t = plan_topology(o, e.lookup(), no_gpus);
  EXPECT_EQ(t.world_size, 3);
  EXPECT_EQ(t.workers[0].rank, 2);
  EXPECT_FALSE(t.serve);
  EXPECT_EQ(t.connect_host, "w0");
  EXPECT_EQ(t.connect_port, 7001);
}

TEST(Topology, TfConfigTaskOutsideItsCluster) {
  FakeEnv e;
  e.vars["TF_CONFIG"] =
      R"({"cluster": {"chief": ["c:1"], "worker": ["w0:2"]}, "task": {"type": "worker", "index": 1}})";
  LaunchOptions o;
  o.nproc = 1;
  EXPECT_EQ(hb::guard([&] { plan_topology(o, e.lookup(), no_gpus); }),
            HB_ERR_CONFIG);
  EXPECT_NE(std::string(hb_last_error()).find("TF_CONFIG"), std::string::npos)
      << hb_last_error();
}

TEST(WorkerEnvironment, ReplacesAndAddsTheHbVariables) {
  Topology t;
  t.world_size = 2;
  t.local_world_size = 2;
  t.connect_host = "127.0.0.1";
  t.master_port = 4400;
  LocalWorker w;
  w.rank = 1;
  w.local_rank = 1;
  w.cuda_device = "5";
  std::vector<std::string> env =
      worker_environment({"PATH=/bin", "HB_RANK=9", "CUDA_VISIBLE_DEVICES=4,5",
                          "HB_RANKING=keep", "RANK=7", "MASTER_PORT=1"},
                         t, w, 4321);
  std::sort(env.begin(), env.end());
  EXPECT_EQ(env, (std::vector<std::string>{
                     "CUDA_VISIBLE_DEVICES=5", "HB_LOCAL_RANK=1",
                     "HB_LOCAL_WORLD_SIZE=2", "HB_RANK=1", "HB_RANKING=keep",
                     "HB_RENDEZVOUS=127.0.0.1:4321", "HB_RENDEZVOUS_SERVED=1",
                     "HB_WORLD_SIZE=2", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2",
                     "MASTER_ADDR=127.0.0.1", "MASTER_PORT=4400", "PATH=/bin",
                     "PYTHONUNBUFFERED=1", "RANK=1", "WORLD_SIZE=2"}));
  // An IPv6 host: bracketed in HB_RENDEZVOUS, bare in MASTER_ADDR.
  t.connect_host = "::1";
  env = worker_environment({}, t, w, 4321);
  EXPECT_NE(std::find(env.begin(), env.end(), "HB_RENDEZVOUS=[::1]:4321"),
            env.end());
  EXPECT_NE(std::find(env.begin(), env.end(), "MASTER_ADDR=::1"), env.end());
  t.in_world = false;
  w.cuda_device.clear();
  env = worker_environment({"PYTHONUNBUFFERED=0"}, t, w, 4321);
  EXPECT_EQ(env, (std::vector<std::string>{"PYTHONUNBUFFERED=0"}));
}

TEST(EvaluatorEnvironment, ATfConfigEvaluatorTaskWithoutRankVariables) {
  Topology t;
  t.world_size = 2;
  t.local_world_size = 2;
  t.connect_host = "127.0.0.1";
  t.restart_count = 1;
  std::vector<std::string> env = evaluator_environment(
      {"PATH=/bin", "HB_RANK=0", "HB_WORLD_SIZE=2", "RANK=0", "SLURM_PROCID=3",
       "OMPI_COMM_WORLD_RANK=1", "HB_RENDEZVOUS=x:1", "HB_RANKING=keep",
       "TF_CONFIG={}", "HB_RESTART_COUNT=7"},
      t, 5000);
  std::sort(env.begin(), env.end());
  EXPECT_EQ(env, (std::vector<std::string>{
                     "HB_RANKING=keep", "HB_RESTART_COUNT=1", "PATH=/bin",
                     "PYTHONUNBUFFERED=1",
                     "TF_CONFIG={\"cluster\":{\"worker\":[\"127.0.0.1:5000\","
                     "\"127.0.0.1:5001\"]},\"task\":{\"type\":\"evaluator\","
                     "\"index\":0}}"}));
  t.connect_host = "::1";
  env = evaluator_environment({}, t, 5000);
  EXPECT_NE(std::find(env.begin(), env.end(),
                      "TF_CONFIG={\"cluster\":{\"worker\":[\"[::1]:5000\","
                      "\"[::1]:5001\"]},\"task\":{\"type\":\"evaluator\","
                      "\"index\":0}}"),
            env.end());
}

TEST(LaunchOptions, EvaluatorOption) {
  const char *argv[] = {"hbrun", "-n", "2", "--evaluator", "--", "prog"};
  LaunchOptions o = parse_command_line(6, argv);
  EXPECT_TRUE(o.evaluator);
  EXPECT_EQ(o.nproc, 2);
  FakeEnv e;
  e.vars["TF_CONFIG"] =
      "{\"cluster\":{\"worker\":[\"h:1\"]},\"task\":{\"type\":\"worker\","
      "\"index\":0}}";
  EXPECT_TRUE(plan_topology(o, e.lookup(), no_gpus).from_tf_config);
  EXPECT_FALSE(plan_topology(o, FakeEnv().lookup(), no_gpus).from_tf_config);
}

// The ports hbrun picks for MASTER_PORT and its ps tasks come from below
// the kernel's ephemeral range (there no connect() of another process
// takes one between the pick and the worker's bind), and are free.
TEST(Topology, FreePortsComeFromBelowTheEphemeralRange) {
  int low = 32768;
  if (FILE *f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%d", &low) != 1) low = 32768;
    std::fclose(f);
  }
  for (int i = 0; i < 20; ++i) {
    const int port = hb::free_port("127.0.0.1", -1);
    ASSERT_GT(port, 0);
    if (low > 10001) {
      EXPECT_GE(port, 10000);
      EXPECT_LT(port, low);
    }
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(uint16_t(port));
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a), 0)
        << "port " << port;
    ::close(fd);
  }
  EXPECT_EQ(hb::free_port("not-an-address", 7), 7)
      << "no port to be had: the fallback";
}

TEST(WorkerThreads, SplitsTheCpusBetweenTheLocalWorkers) {
  EXPECT_EQ(threads_per_worker(2, 1), 0);  // one worker: left alone
  EXPECT_EQ(threads_per_worker(2, 2), 1);
  EXPECT_EQ(threads_per_worker(2, 4), 1);  // never 0 threads
  EXPECT_EQ(threads_per_worker(16, 4), 4);
  EXPECT_EQ(threads_per_worker(16, 3), 5);
  EXPECT_GE(usable_cpus(), 1);
}

TEST(WorkerCpus, SlicesTheCpusLikeMpirunsBindToCore) {
  using V = std::vector<std::vector<int>>;
  const std::vector<int> four = {0, 1, 4, 5};
  EXPECT_EQ(worker_cpu_slices(four, 2, false, "auto"), (V{{0, 1}, {4, 5}}));
  EXPECT_EQ(worker_cpu_slices(four, 3, false, "auto"), (V{{0}, {1}, {4}}));
  EXPECT_EQ(worker_cpu_slices(four, 1, false, "auto"), (V{{0, 1, 4, 5}}));
  // More workers than CPUs: auto and core share them round-robin (4 ranks
  // on 2 CPUs trained 1.3-1.4x faster bound than unbound,
  // docs/performance.md, "More ranks than CPUs: bound round-robin").
  EXPECT_EQ(worker_cpu_slices({0, 1}, 4, false, "auto"),
            (V{{0}, {1}, {0}, {1}}));
  EXPECT_EQ(worker_cpu_slices({0, 1}, 3, false, "auto"), (V{{0}, {1}, {0}}));
  EXPECT_EQ(worker_cpu_slices({0, 1}, 4, false, "core"),
            (V{{0}, {1}, {0}, {1}}));
  EXPECT_EQ(worker_cpu_slices({0, 1}, 4, true, "auto"), (V{{}, {}, {}, {}}));
  // GPU workers only under core; none binds nothing.
  EXPECT_EQ(worker_cpu_slices(four, 2, true, "auto"), (V{{}, {}}));
  EXPECT_EQ(worker_cpu_slices(four, 2, true, "core"), (V{{0, 1}, {4, 5}}));
  EXPECT_EQ(worker_cpu_slices(four, 2, false, "none"), (V{{}, {}}));
  EXPECT_EQ(usable_cpu_list().size(), static_cast<size_t>(usable_cpus()));
}

TEST(WorkerThreads, AddsOmpNumThreadsUnlessTheUserSetIt) {
  Topology t;
  t.world_size = t.local_world_size = 2;
  t.connect_host = "127.0.0.1";
  t.threads_per_worker = 3;
  LocalWorker w;
  auto omp = [](const std::vector<std::string> &env) {
    std::vector<std::string> found;
    for (const auto &kv : env)
      if (kv.compare(0, 16, "OMP_NUM_THREADS=") == 0) found.push_back(kv);
    return found;
  };
  EXPECT_EQ(omp(worker_environment({"PATH=/bin"}, t, w, 1)),
            std::vector<std::string>{"OMP_NUM_THREADS=3"});
  // The user's value (even an empty one) wins; OPENBLAS_NUM_THREADS and
  // MKL_NUM_THREADS are the user's too and stay as they are.
  EXPECT_EQ(omp(worker_environment({"OMP_NUM_THREADS=8"}, t, w, 1)),
            std::vector<std::string>{"OMP_NUM_THREADS=8"});
  EXPECT_EQ(omp(worker_environment({"OMP_NUM_THREADS="}, t, w, 1)),
            std::vector<std::string>{"OMP_NUM_THREADS="});
  std::vector<std::string> blas =
      worker_environment({"OPENBLAS_NUM_THREADS=2"}, t, w, 1);
  EXPECT_NE(std::find(blas.begin(), blas.end(), "OPENBLAS_NUM_THREADS=2"),
            blas.end());
  t.threads_per_worker = 0;
  EXPECT_TRUE(omp(worker_environment({"PATH=/bin"}, t, w, 1)).empty());
}

// Reads everything the relay wrote to the pipe.
std::string read_all(int fd) {
  std::string s;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) s.append(buf, n);
  return s;
}

// A worker's pipe (src) into the relay, and the relay's output pipe (dst),
// both read without blocking.
class LineRelayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::pipe(src), 0);
    ASSERT_EQ(::pipe(dst), 0);
    ::fcntl(src[0], F_SETFL, O_NONBLOCK);
    ::fcntl(dst[0], F_SETFL, O_NONBLOCK);
    // The relay writes whole lines (up to 64 KiB) in one blocking write.
    ::fcntl(dst[1], F_SETPIPE_SZ, 1 << 20);
  }
  void TearDown() override {
    for (int fd : {src[1], dst[0], dst[1]})
      if (fd >= 0) ::close(fd);
  }
  int src[2] = {-1, -1}, dst[2] = {-1, -1};  // the relay owns src[0]
};

TEST_F(LineRelayTest, WholeLinesWithPrefixAndTheLastPartialLine) {
  LineRelay relay(src[0], dst[1], "[7] ");
  ASSERT_EQ(::write(src[1], "ab", 2), 2);
  relay.pump();
  EXPECT_EQ(read_all(dst[0]), "");  // no newline yet: nothing written
  ASSERT_EQ(::write(src[1], "c\n\nde\nf", 7), 7);
  relay.pump();
  EXPECT_EQ(read_all(dst[0]), "[7] abc\n[7] \n[7] de\n");
  ::close(src[1]);
  src[1] = -1;
  relay.drain_and_close();
  EXPECT_FALSE(relay.open());
  EXPECT_EQ(read_all(dst[0]), "[7] f\n");
}

TEST_F(LineRelayTest, CutsOverlongLines) {
  LineRelay relay(src[0], dst[1], "[0] ");
  std::string big(LineRelay::kMaxLine + 10, 'x');
  int writer_fd = src[1];
  src[1] = -1;
  std::thread writer([&] {
    hb::launcher::write_all(writer_fd, big.data(), big.size());
    ::close(writer_fd);
  });
  std::string out;
  while (relay.open()) {
    relay.pump();
    out += read_all(dst[0]);
    ::usleep(1000);
  }
  writer.join();
  out += read_all(dst[0]);
  EXPECT_EQ(out, "[0] " + std::string(LineRelay::kMaxLine, 'x') +
                     "\n[0] xxxxxxxxxx\n");
}

}  // namespace

namespace {

WorkerFailure failed(int rank, int code) {
  return WorkerFailure{std::to_string(rank), rank, code, "failed"};
}

TEST(RootCause, TheFirstToLeaveTheStoreWinsOverTheFirstReaped) {
  // Rank 2 aborted; rank 0 saw HB_ERR_PEER_FAILED and was reaped first.
  EXPECT_EQ(root_cause({failed(0, 4), failed(2, 134)}, {2, 0}), 1u);
  EXPECT_EQ(root_cause({failed(0, 4), failed(3, 4), failed(2, 3)}, {2, 3, 0}),
            2u);
  // Reaped in the order they left: the first.
  EXPECT_EQ(root_cause({failed(2, 134), failed(0, 4)}, {2, 0}), 0u);
}

TEST(RootCause, WorkersTheStoreNeverSawKeepTheirReapOrder) {
  // Rank 1 died before joining: nobody followed it through the store.
  EXPECT_EQ(root_cause({failed(1, 127), failed(0, 4)}, {0}), 0u);
  EXPECT_EQ(root_cause({failed(-1, 1), failed(0, 4)}, {0}), 0u);
  // The first reaped left; a later one never joined: not earlier than it.
  EXPECT_EQ(root_cause({failed(0, 4), failed(1, 127)}, {0}), 0u);
  EXPECT_EQ(root_cause({failed(0, 4)}, {}), 0u);
}

TEST(RootCause, DepartureLogKeepsTheOrder) {
  DepartureLog log;
  log.add(3);
  log.add(1);
  EXPECT_EQ(log.order(), (std::vector<int>{3, 1}));
  log.add_join(2);
  EXPECT_TRUE(log.joined(2));
  EXPECT_FALSE(log.joined(3));  // left without joining: not in the world
  log.clear();
  EXPECT_TRUE(log.order().empty());
  EXPECT_FALSE(log.joined(2));
}

}  // namespace

namespace {

TEST(LaunchOptions, RestartOptions) {
  LaunchOptions o =
      parse({"-n", "4", "--max-restarts", "3", "--min-nproc=2", "--", "p"});
  EXPECT_EQ(o.max_restarts, 3);
  EXPECT_EQ(o.min_nproc, 2);
  EXPECT_EQ(parse_status({"--max-restarts", "-1", "--", "p"}),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(parse_status({"-n", "2", "--min-nproc", "1", "--", "p"}),
            HB_ERR_INVALID_ARGUMENT);  // without --max-restarts
  EXPECT_EQ(parse_status({"-n", "2", "--max-restarts", "1", "--min-nproc", "3",
                          "--", "p"}),
            HB_ERR_INVALID_ARGUMENT);
  // With --ps: one budget of (worker or whole-job) restarts; a worker that
  // cannot start again is left out anyway; an evaluator follows the job's
  // checkpoints (ps tables included).
  LaunchOptions ps = parse({"--ps", "2", "--max-restarts", "3", "--", "p"});
  EXPECT_EQ(ps.num_ps, 2);
  EXPECT_EQ(ps.max_restarts, 3);
  EXPECT_EQ(parse_status({"-n", "2", "--ps", "1", "--max-restarts", "1",
                          "--min-nproc", "1", "--", "p"}),
            HB_ERR_INVALID_ARGUMENT);
  LaunchOptions pe = parse({"-n", "2", "--ps", "1", "--evaluator", "--", "p"});
  EXPECT_TRUE(pe.evaluator);
  EXPECT_EQ(pe.num_ps, 1);
}

TEST(Topology, ShrinkRenumbersTheRemainingWorkersAndKeepsTheirGpus) {
  FakeEnv env;
  env.vars["CUDA_VISIBLE_DEVICES"] = "4,5,6,7";
  Topology full = plan_topology(parse({"--", "p"}), env.lookup(), no_gpus);
  Topology t = shrink_topology(full, {0, 2, 3});
  EXPECT_EQ(t.world_size, 3);
  EXPECT_EQ(t.local_world_size, 3);
  ASSERT_EQ(t.workers.size(), 3u);
  std::vector<std::string> gpus;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(t.workers[i].rank, i);
    EXPECT_EQ(t.workers[i].local_rank, i);
    EXPECT_EQ(t.workers[i].label, std::to_string(i));
    gpus.push_back(t.workers[i].cuda_device);
  }
  EXPECT_EQ(gpus, (std::vector<std::string>{"4", "6", "7"}));
  std::vector<std::string> e = worker_environment({}, t, t.workers[2], 99);
  EXPECT_NE(std::find(e.begin(), e.end(), "HB_WORLD_SIZE=3"), e.end());
  EXPECT_EQ(std::find(e.begin(), e.end(), "HB_RESTART_COUNT=0"), e.end());
  t.restart_count = 2;
  t.max_restarts = 5;
  e = worker_environment({"HB_RESTART_COUNT=9"}, t, t.workers[2], 99);
  EXPECT_EQ(std::count(e.begin(), e.end(), "HB_RESTART_COUNT=2"), 1);
  EXPECT_EQ(std::count(e.begin(), e.end(), "HB_RESTART_COUNT=9"), 0);
  EXPECT_NE(std::find(e.begin(), e.end(), "TORCHELASTIC_MAX_RESTARTS=5"),
            e.end());
}

}  // namespace

TEST(LaunchOptions, JoinTakesAJobAndRefusesWhatTheJobOwns) {
  LaunchOptions o = parse({"--join", "4242", "-n", "2", "--", "p"});
  EXPECT_EQ(o.join, "4242");
  EXPECT_EQ(o.nproc, 2);
  EXPECT_EQ(parse({"--join=/tmp/x.job", "--max-restarts", "1", "--", "p"})
                .max_restarts,
            1);
  for (std::vector<const char *> bad :
       {std::vector<const char *>{"--join", "", "--", "p"},
        {"--join", "1", "--ps", "1", "--", "p"},
        {"--join", "1", "--evaluator", "--", "p"},
        {"--join", "1", "--port", "5", "--", "p"},
        {"--join", "1", "--host", "0.0.0.0", "--", "p"}})
    EXPECT_EQ(parse_status(bad), HB_ERR_INVALID_ARGUMENT) << bad[2];
}

TEST(JoinedWorkerEnvironment, PsHostsAndRankWithoutARendezvous) {
  Topology t;
  t.restart_count = 1;
  t.max_restarts = 3;
  std::vector<std::string> env = joined_worker_environment(
      {"PATH=/bin", "HB_RENDEZVOUS=h:1", "HB_TASK_TYPE=ps", "HB_TASK_ID=0",
       "HB_PS_HOSTS=old:1", "TF_CONFIG={}", "MASTER_PORT=9"},
      t, 3, 4, "127.0.0.1:7,127.0.0.1:8");
  std::sort(env.begin(), env.end());
  EXPECT_EQ(env, (std::vector<std::string>{
                     "HB_LOCAL_RANK=0", "HB_LOCAL_WORLD_SIZE=1",
                     "HB_PS_HOSTS=127.0.0.1:7,127.0.0.1:8", "HB_RANK=3",
                     "HB_RESTART_COUNT=1", "HB_WORLD_SIZE=4", "LOCAL_RANK=0",
                     "LOCAL_WORLD_SIZE=1", "PATH=/bin", "PYTHONUNBUFFERED=1",
                     "RANK=3", "TORCHELASTIC_MAX_RESTARTS=3",
                     "TORCHELASTIC_RESTART_COUNT=1", "WORLD_SIZE=4"}));
}

TEST(JobFile, JoinersTakeTheNextRanksOfARunningJob) {
  char dir[] = "/tmp/hb_jobfile_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/hbrun-1.job";
  JobInfo info;
  info.pid = getpid();  // a running "hbrun"
  info.ps_hosts = "127.0.0.1:5";
  info.world = 2;
  write_job_file(path, info);
  EXPECT_FALSE(joiners_running(path));
  JobInfo a = join_job(path, 1, getpid());
  EXPECT_EQ(a.next_rank, 2);
  EXPECT_EQ(a.ps_hosts, "127.0.0.1:5");
  EXPECT_EQ(join_job(path, 2, 999999999).next_rank, 3);
  EXPECT_EQ(read_job_file(path).next_rank, 5);
  EXPECT_TRUE(joiners_running(path));  // this process joined
  // A whole-job restart: new ps tasks, the started world again; the
  // joiners are still waited for.
  info.ps_hosts = "127.0.0.1:6";
  write_job_file(path, info);
  EXPECT_EQ(read_job_file(path).next_rank, 2);
  EXPECT_EQ(read_job_file(path).ps_hosts, "127.0.0.1:6");
  EXPECT_TRUE(joiners_running(path));
  // An id names the file in HB_JOB_DIR.
  setenv("HB_JOB_DIR", dir, 1);
  EXPECT_EQ(job_file_path("1"), path);
  EXPECT_EQ(read_job_file("1").pid, getpid());
  unsetenv("HB_JOB_DIR");
  // Its hbrun gone: a stale file; no file: no job. Both name the job.
  info.pid = 999999999;
  write_job_file(path, info);
  try {
    join_job(path, 1, getpid());
    ADD_FAILURE() << "joined a job whose hbrun is gone";
  } catch (const hb::Error &e) {
    EXPECT_NE(std::string(e.what()).find("is gone"), std::string::npos)
        << e.what();
  }
  unlink(path.c_str());
  EXPECT_EQ(hb::guard([&] { join_job(path, 1, getpid()); }), HB_ERR_CONFIG);
  EXPECT_FALSE(joiners_running(path));
  rmdir(dir);
}
