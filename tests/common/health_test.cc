// Health (src/common/health.h): subscribers and their callbacks across
// threads.
#include "common/health.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

namespace {

using hb::Health;

// A subscriber frees what its callback uses once unsubscribe returns: a
// callback still running on the failing thread must have finished by then
// (GlooBackend's mesh, closed by its callback while a world tears down).
TEST(Health, UnsubscribeWaitsForTheCallbackRunningOnAnotherThread) {
  Health h;
  std::promise<void> entered;
  std::atomic<bool> finished{false};
  const int id = h.subscribe([&](hb_status, const std::string &) {
    entered.set_value();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    finished = true;
  });
  std::thread failing([&] { h.fail(HB_ERR_PEER_FAILED, "rank 1 lost"); });
  entered.get_future().wait();
  h.unsubscribe(id);
  EXPECT_TRUE(finished.load());
  failing.join();
}

// A callback may unsubscribe itself (a subscriber torn down on the failing
// thread), or another subscriber not yet called, which then is not called.
TEST(Health, CallbacksMayUnsubscribeOnTheFailingThread) {
  Health h;
  int second_calls = 0;
  int second = -1;
  int first = -1;
  first = h.subscribe([&](hb_status, const std::string &) {
    h.unsubscribe(first);
    h.unsubscribe(second);
  });
  second = h.subscribe([&](hb_status, const std::string &) { ++second_calls; });
  auto done = std::async(std::launch::async,
                         [&] { return h.fail(HB_ERR_ABORTED, "aborted"); });
  ASSERT_EQ(done.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "a callback unsubscribing on its own thread deadlocked";
  EXPECT_TRUE(done.get());
  EXPECT_EQ(second_calls, 0);
}

// After the failure, a new subscriber is called at once (on its thread) and
// fail records only the first failure.
TEST(Health, LateSubscriberIsCalledAtOnceWithTheFirstFailure) {
  Health h;
  EXPECT_TRUE(h.fail(HB_ERR_PEER_FAILED, "rank 2 lost"));
  EXPECT_FALSE(h.fail(HB_ERR_ABORTED, "later"));
  std::string got;
  const int id = h.subscribe([&](hb_status st, const std::string &m) {
    EXPECT_EQ(st, HB_ERR_PEER_FAILED);
    got = m;
    h.unsubscribe(-1);  // no such subscriber: nothing to wait for
  });
  EXPECT_EQ(got, "rank 2 lost");
  h.unsubscribe(id);
  EXPECT_EQ(h.status(), HB_ERR_PEER_FAILED);
}

}  // namespace
