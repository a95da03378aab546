// Failure behaviour with ranks as threads: a rank that dies, one that hangs
// (its loss reported through Health, as the rendezvous heartbeats do), an
// abort and a timeout all end every blocked call promptly with the right
// status; the backends are then still destroyable (ASan checks leaks).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "thread_world.h"

namespace {

using hb::test::ThreadWorld;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Parameter: over TCP, whether allreduce takes the registered-buffer path
// (for every size these tests use) or the per-call-buffer one: their waits
// break differently (a failed pair vs the WaitBreaker); or shared memory
// (a futex wait, broken by the transport's trip or the peer's flag).
class Failure : public ::testing::TestWithParam<std::string> {
 protected:
  hb::comm::BackendConfig quick_config() const {
    hb::comm::BackendConfig cfg;
    cfg.timeout_ms = 20000;
    cfg.peer_report_grace_ms = 100;
    cfg.transport = GetParam() == "shm" ? "shm" : "tcp";
    cfg.staged_bytes =
        GetParam() == "registered" ? (int64_t(16) << 20) : 0;  // > 4 MiB
    return cfg;
  }
};

// Ranks allreduce 1 MiB in a loop until it fails; returns the status.
void allreduce_until_failure(ThreadWorld &w, int r, std::vector<float> &buf) {
  for (;;)
    w.at(r).allreduce(buf.data(), buf.data(), buf.size(), HB_FLOAT32, HB_SUM);
}

TEST_P(Failure, DeadPeerGivesPeerFailedNamingIt) {
  ThreadWorld w(3, quick_config());
  std::vector<std::vector<float>> buf(3, std::vector<float>(1 << 18, 0.f));
  auto t0 = Clock::now();
  std::vector<std::string> msg;
  auto st = w.try_run(
      [&](int r) {
        if (r == 2) {
          for (int i = 0; i < 5; ++i)
            w.at(r).allreduce(buf[r].data(), buf[r].data(), buf[r].size(),
                              HB_FLOAT32, HB_SUM);
          w.drop(2);  // closes its sockets, as a killed process's kernel would
          // ... and the rendezvous then reports it lost, which is what names
          // the rank (within peer_report_grace_ms). Gloo's own message names
          // only an address, which cannot always be mapped back to a rank
          // (accepted sockets all share the listener's address).
          for (int s = 0; s < 2; ++s)
            w.health(s).fail(HB_ERR_PEER_FAILED,
                             "rank 2 lost (rendezvous): connection closed");
          return;
        }
        allreduce_until_failure(w, r, buf[r]);
      },
      &msg);
  EXPECT_LT(seconds_since(t0), 10.0);
  EXPECT_EQ(st[2], HB_OK);
  bool named = false;
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(st[r], HB_ERR_PEER_FAILED) << msg[r];
    named |= msg[r].find("rank 2") != std::string::npos;
    // The context is unusable from now on, without touching the network.
    EXPECT_EQ(HB_ERR_PEER_FAILED, hb::guard([&] {
                w.at(r).allreduce(buf[r].data(), buf[r].data(), 4, HB_FLOAT32,
                                  HB_SUM);
              }));
  }
  EXPECT_TRUE(named) << msg[0] << " | " << msg[1];
}

TEST_P(Failure, HungPeerReportedByHealthBreaksTheWait) {
  ThreadWorld w(2, quick_config());
  std::vector<float> buf(1 << 16, 1.f);
  std::atomic<bool> release{false};
  std::thread reporter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    w.health(0).fail(HB_ERR_PEER_FAILED,
                     "rank 1 lost: no heartbeat for 5000 ms");
  });
  auto t0 = Clock::now();
  double rank0_done = 0;
  std::vector<std::string> msg;
  auto st = w.try_run(
      [&](int r) {
        if (r == 1) {  // stopped: never joins the collective
          while (!release.load())
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
          return;
        }
        struct Done {
          double &t;
          Clock::time_point t0;
          std::atomic<bool> &release;
          ~Done() {
            t = seconds_since(t0);
            release = true;
          }
        } done{rank0_done, t0, release};
        w.at(0).allreduce(buf.data(), buf.data(), buf.size(), HB_FLOAT32,
                          HB_SUM);
      },
      &msg);
  reporter.join();
  EXPECT_EQ(st[0], HB_ERR_PEER_FAILED);
  EXPECT_NE(msg[0].find("no heartbeat"), std::string::npos) << msg[0];
  EXPECT_GE(rank0_done, 0.25);
  EXPECT_LT(rank0_done, 3.0);
}

TEST_P(Failure, AbortEndsEveryRanksCallWithTheReason) {
  ThreadWorld w(3, quick_config());
  std::vector<std::vector<float>> buf(3, std::vector<float>(1 << 20, 0.f));
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    // hb_context_abort: the rendezvous tells every rank's Health.
    for (int r = 0; r < 3; ++r)
      w.health(r).fail(HB_ERR_ABORTED, "aborted by rank 1: test says stop");
  });
  auto t0 = Clock::now();
  std::vector<std::string> msg;
  auto st =
      w.try_run([&](int r) { allreduce_until_failure(w, r, buf[r]); }, &msg);
  aborter.join();
  EXPECT_LT(seconds_since(t0), 5.0);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(st[r], HB_ERR_ABORTED) << msg[r];
    EXPECT_NE(msg[r].find("test says stop"), std::string::npos) << msg[r];
  }
}

TEST_P(Failure, SilentPeerTimesOut) {
  hb::comm::BackendConfig cfg = quick_config();
  cfg.timeout_ms = 500;
  ThreadWorld w(2, cfg);
  std::vector<int64_t> buf(1000, 1);
  auto t0 = Clock::now();
  std::vector<std::string> msg;
  auto st = w.try_run(
      [&](int r) {
        if (r == 1) return;  // never calls
        w.at(0).allreduce(buf.data(), buf.data(), buf.size(), HB_INT64, HB_SUM);
      },
      &msg);
  double took = seconds_since(t0);
  EXPECT_EQ(st[0], HB_ERR_TIMEOUT) << msg[0];
  EXPECT_NE(msg[0].find("timeout_ms=500"), std::string::npos) << msg[0];
  EXPECT_GE(took, 0.4);
  EXPECT_LT(took, 5.0);
}

TEST_P(Failure, SilentPeerTimesOutInAlltoallv) {
  hb::comm::BackendConfig cfg = quick_config();
  cfg.timeout_ms = 500;
  ThreadWorld w(2, cfg);
  std::vector<float> send(10, 1.f), recv(10);
  int64_t counts[] = {5, 5}, offs[] = {0, 5};
  std::vector<std::string> msg;
  auto st = w.try_run(
      [&](int r) {
        if (r == 1) return;
        w.at(0).alltoallv(send.data(), counts, offs, recv.data(), counts, offs,
                          HB_FLOAT32);
      },
      &msg);
  EXPECT_EQ(st[0], HB_ERR_TIMEOUT) << msg[0];
}

INSTANTIATE_TEST_SUITE_P(Paths, Failure,
                         ::testing::Values("per_call", "registered", "shm"),
                         [](const ::testing::TestParamInfo<std::string> &p) {
                           return p.param;
                         });

}  // namespace
