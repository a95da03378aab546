// The health of a context: the first failure (a dead peer, an abort, a
// broken backend) is recorded once and then fails every later call. Modules
// that block (the Gloo backend, the NCCL plugin, rendezvous waits) subscribe
// to be told at once, so they can break their waits instead of hanging.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hb.h"

namespace hb {

class Health {
 public:
  using Callback = std::function<void(hb_status, const std::string &)>;

  // Records the failure if it is the first one and notifies subscribers
  // (outside the lock; one unsubscribed meanwhile is skipped). Returns
  // true if this call recorded it.
  bool fail(hb_status status, const std::string &message);
  bool ok() const { return !failed_.load(std::memory_order_acquire); }
  // Throws hb::Error with the recorded status and message if failed.
  void check() const;
  hb_status status() const;
  std::string message() const;

  // Called at once if already failed. Returns an id for unsubscribe.
  int subscribe(Callback cb);
  // Returns once the callback can no longer run: a call of it in progress
  // on another thread has finished (its subscriber may then free what the
  // callback touches). From inside the callback itself (a subscriber torn
  // down on the failing thread) it does not wait for that call.
  void unsubscribe(int id);

 private:
  std::atomic<bool> failed_{false};
  mutable std::mutex mu_;
  hb_status status_ = HB_OK;
  std::string message_;
  int next_id_ = 0;
  std::map<int, Callback> subscribers_;
  // Callbacks being called, by id, with the thread calling each.
  std::multimap<int, std::thread::id> running_;
  std::condition_variable done_;  // a callback returned

  // Calls subscriber id's callback unless it is gone; lock held on entry
  // and on return, released during the call.
  void call(std::unique_lock<std::mutex> &lock, int id, hb_status status,
            const std::string &message);
};

}  // namespace hb
