#include "common/health.h"

#include <chrono>
#include <exception>
#include <vector>

#include "abi/error.h"
#include "common/log.h"

namespace hb {

bool Health::fail(hb_status status, const std::string &message) {
  std::unique_lock<std::mutex> lock(mu_);
  if (failed_.load()) return false;
  status_ = status;
  message_ = message;
  failed_.store(true, std::memory_order_release);
  std::vector<int> ids;
  for (const auto &kv : subscribers_) ids.push_back(kv.first);
  for (int id : ids) call(lock, id, status_, message_);
  return true;
}

void Health::call(std::unique_lock<std::mutex> &lock, int id, hb_status status,
                  const std::string &message) {
  auto sub = subscribers_.find(id);
  if (sub == subscribers_.end()) return;  // unsubscribed meanwhile
  Callback cb = sub->second;
  const auto run = running_.emplace(id, std::this_thread::get_id());
  lock.unlock();
  std::exception_ptr ex;
  try {
    cb(status, message);
  } catch (...) {
    ex = std::current_exception();
  }
  // What the callback holds goes before its unsubscribe may return.
  cb = nullptr;
  lock.lock();
  running_.erase(run);
  done_.notify_all();
  if (ex) std::rethrow_exception(ex);
}

void Health::check() const {
  if (ok()) return;
  std::lock_guard<std::mutex> lock(mu_);
  throw Error(status_, message_);
}

hb_status Health::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

std::string Health::message() const {
  std::lock_guard<std::mutex> lock(mu_);
  return message_;
}

int Health::subscribe(Callback cb) {
  std::unique_lock<std::mutex> lock(mu_);
  const int id = next_id_++;
  subscribers_[id] = std::move(cb);
  // status_ and message_ never change once failed.
  if (failed_.load()) call(lock, id, status_, message_);
  return id;
}

void Health::unsubscribe(int id) {
  std::unique_lock<std::mutex> lock(mu_);
  subscribers_.erase(id);
  // A subscriber frees what its callback touches once this returns (e.g. a
  // backend's mesh while a failing thread still closes its pairs), so this
  // waits for calls on other threads; the callbacks only set flags, close
  // sockets and wake waiters, so the wait is short. Its own thread's call
  // is not waited for (a subscriber torn down from inside its callback).
  const std::thread::id self = std::this_thread::get_id();
  auto idle = [&] {
    auto range = running_.equal_range(id);
    for (auto it = range.first; it != range.second; ++it)
      if (it->second != self) return false;
    return true;
  };
  // No give-up: returning while the callback runs would free what it uses.
  // A callback stuck this long is a bug; say so instead of hanging mutely.
  while (!done_.wait_for(lock, std::chrono::seconds(10), idle))
    HB_LOG_WARN(
        "health: unsubscribe of subscriber %d waits for its callback, "
        "still running on another thread after 10 s",
        id);
}

}  // namespace hb
