// CHECK / CHECK_OK for the one-rank programs of multi-process tests: print
// which rank failed where, and exit non-zero at once (hbrun then stops the
// others; _exit skips destructors that could block on a broken context).
#pragma once

#include <unistd.h>

#include <cstdarg>
#include <cstdio>

#include "hb.h"

// Defined by each program; the rank is set once known.
extern int g_mp_rank;
extern const char *g_mp_name;

[[noreturn]] inline void hb_mp_fail(int line, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "[%s r%d] FAILED at line %d: %s\n", g_mp_name, g_mp_rank,
               line, msg);
  std::fflush(stderr);
  _exit(1);
}

#define CHECK(cond, ...)                            \
  do {                                              \
    if (!(cond)) hb_mp_fail(__LINE__, __VA_ARGS__); \
  } while (0)

#define CHECK_OK(call)                                            \
  do {                                                            \
    hb_status st_ = (call);                                       \
    CHECK(st_ == HB_OK, "%s: %s: %s", #call, hb_status_name(st_), \
          hb_last_error());                                       \
  } while (0)
