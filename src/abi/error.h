// The error model behind the C ABI: internal code throws hb::Error, every
// exported function runs inside hb::guard, which turns any exception into a
// status plus a thread-local message (hb_last_error).
#pragma once

#include <string>
#include <utility>

#include "hb.h"

namespace hb {

class Error : public std::exception {
 public:
  Error(hb_status status, std::string message)
      : status_(status), message_(std::move(message)) {}
  hb_status status() const noexcept { return status_; }
  const char *what() const noexcept override { return message_.c_str(); }

 private:
  hb_status status_;
  std::string message_;
};

// Throws hb::Error(status, printf-formatted message).
[[noreturn]] void fail(hb_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

// printf into a std::string.
std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void set_last_error(const std::string &message);

// Records the exception in flight (call only inside a catch block) and
// returns its status.
hb_status status_from_current_exception() noexcept;

// Runs fn; returns HB_OK or the status of whatever it threw. Every exported
// entry point is written as `return hb::guard([&] { ... });`.
template <class F>
hb_status guard(F &&fn) noexcept {
  try {
    fn();
    return HB_OK;
  } catch (...) {
    return status_from_current_exception();
  }
}

}  // namespace hb

#define HB_CHECK_ARG(cond, ...) \
  do {                          \
    if (!(cond)) ::hb::fail(HB_ERR_INVALID_ARGUMENT, __VA_ARGS__); \
  } while (0)
