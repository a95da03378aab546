#include "common/health.h"

#include <vector>

#include "abi/error.h"

namespace hb {

bool Health::fail(hb_status status, const std::string &message) {
  std::vector<Callback> to_call;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_.load()) return false;
    status_ = status;
    message_ = message;
    failed_.store(true, std::memory_order_release);
    for (auto &kv : subscribers_) to_call.push_back(kv.second);
  }
  for (auto &cb : to_call) cb(status, message);
  return true;
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
  hb_status st;
  std::string msg;
  int id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_id_++;
    subscribers_[id] = cb;
    if (!failed_.load()) return id;
    st = status_;
    msg = message_;
  }
  cb(st, msg);
  return id;
}

void Health::unsubscribe(int id) {
  std::lock_guard<std::mutex> lock(mu_);
  subscribers_.erase(id);
}

}  // namespace hb
