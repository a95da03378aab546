// Liveness across processes: a rank in a child process that is SIGKILLed,
// SIGSTOPped, or leaves cleanly.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <thread>

#include "rdv_test_util.h"

extern char **environ;

namespace hb {
namespace rdv {
namespace test {
namespace {

// A child rank; killed and reaped on destruction whatever happened.
class Child {
 public:
  Child(int port, int rank, int world, const char *mode) {
    std::vector<std::string> args = {RDV_TEST_CHILD,
                                     std::to_string(port),
                                     std::to_string(rank),
                                     std::to_string(world),
                                     std::to_string(kPeerTimeoutMs),
                                     std::to_string(kHeartbeatMs),
                                     mode};
    std::vector<char *> argv;
    for (auto &a : args) argv.push_back(&a[0]);
    argv.push_back(nullptr);
    int rc = posix_spawn(&pid_, RDV_TEST_CHILD, nullptr, nullptr, argv.data(),
                         environ);
    EXPECT_EQ(rc, 0) << "posix_spawn " << RDV_TEST_CHILD;
    if (rc != 0) pid_ = -1;
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      reap();
    }
  }
  pid_t pid() const { return pid_; }
  void signal(int sig) { ASSERT_EQ(kill(pid_, sig), 0); }
  // Waits for the child's exit; returns its wait status.
  int reap() {
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
};

TEST(Liveness, KilledChildFailsThePendingCallsOfTheOthersQuickly) {
  auto server = Server::start(server_config(3));
  auto r0 = join(server->port(), 0, 3);
  Child child(server->port(), 1, 3, "block");
  auto r2 = join(server->port(), 2, 3);
  r0->client->get("child/1/ready", 5000);

  std::chrono::steady_clock::time_point killed;
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    killed = std::chrono::steady_clock::now();
    child.signal(SIGKILL);
  });
  std::string m =
      error_of([&] { r0->client->get("never", 5000); }, HB_ERR_PEER_FAILED);
  int64_t detect = ms_since(killed);
  killer.join();
  EXPECT_NE(m.find("rank 1 lost: connection closed"), std::string::npos) << m;
  EXPECT_LT(detect, 2 * kMarginMs);
  std::printf(
      "[ measure ] SIGKILLed rank detected by another rank's pending get in "
      "%lld ms\n",
      static_cast<long long>(detect));
  EXPECT_TRUE(wait_failed(r2->health, 1000));
  EXPECT_NE(r2->health.message().find("rank 1 lost"), std::string::npos);
  int status = child.reap();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

TEST(Liveness, StoppedChildIsDeclaredLostAfterPeerTimeout) {
  auto server = Server::start(server_config(2));
  auto r0 = join(server->port(), 0, 2);
  Child child(server->port(), 1, 2, "block");
  r0->client->get("child/1/ready", 5000);
  child.signal(SIGSTOP);
  auto stopped = std::chrono::steady_clock::now();
  std::string m =
      error_of([&] { r0->client->barrier("never", 5000); }, HB_ERR_PEER_FAILED);
  int64_t detect = ms_since(stopped);
  EXPECT_NE(m.find("rank 1 lost: no heartbeat"), std::string::npos) << m;
  // The last heartbeat came at most one interval before the stop.
  EXPECT_GE(detect, kPeerTimeoutMs - kHeartbeatMs - 20);
  EXPECT_LT(detect, kPeerTimeoutMs + kMarginMs);
  std::printf(
      "[ measure ] SIGSTOPped rank detected in %lld ms (peer_timeout_ms "
      "%lld)\n",
      static_cast<long long>(detect), static_cast<long long>(kPeerTimeoutMs));
  // Resumed, the child finds itself cut off and fails on its own.
  child.signal(SIGCONT);
  int status = child.reap();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 3) << status;
}

TEST(Liveness, ChildLeavingWithByeIsNotAFailure) {
  auto server = Server::start(server_config(2));
  std::atomic<int> lost{0};
  server->on_peer_lost([&](int, const std::string &) { lost++; });
  auto r0 = join(server->port(), 0, 2);
  Child child(server->port(), 1, 2, "bye");
  r0->client->get("child/1/ready", 5000);
  r0->client->set("go", "");
  int status = child.reap();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  std::this_thread::sleep_for(std::chrono::milliseconds(kPeerTimeoutMs + 100));
  EXPECT_TRUE(r0->health.ok()) << r0->health.message();
  EXPECT_EQ(lost.load(), 0);
}

}  // namespace
}  // namespace test
}  // namespace rdv
}  // namespace hb
