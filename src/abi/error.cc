#include "abi/error.h"

#include <cstdarg>
#include <cstdio>
#include <new>
#include <vector>

namespace hb {
namespace {

thread_local std::string t_last_error;

std::string vformat(const char *fmt, va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  if (n <= 0) return std::string();
  std::string out(static_cast<size_t>(n) + 1, '\0');
  std::vsnprintf(&out[0], out.size(), fmt, ap);
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace

std::string format(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = vformat(fmt, ap);
  va_end(ap);
  return s;
}

void fail(hb_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = vformat(fmt, ap);
  va_end(ap);
  throw Error(status, std::move(s));
}

void set_last_error(const std::string &message) {
  try {
    t_last_error = message;
  } catch (...) {
    t_last_error.clear();  // out of memory: an empty message beats a crash
  }
}

hb_status status_from_current_exception() noexcept {
  try {
    throw;
  } catch (const Error &e) {
    set_last_error(e.what());
    return e.status();
  } catch (const std::bad_alloc &) {
    set_last_error("out of memory");
    return HB_ERR_OUT_OF_MEMORY;
  } catch (const std::exception &e) {
    set_last_error(std::string("internal error: ") + e.what());
    return HB_ERR_INTERNAL;
  } catch (...) {
    set_last_error("internal error: unknown exception");
    return HB_ERR_INTERNAL;
  }
}

}  // namespace hb

extern "C" const char *hb_last_error(void) { return hb::t_last_error.c_str(); }
