// CHECK / CHECK_OK for the one-rank programs of multi-process tests: print
// which rank failed where, and exit non-zero (hbrun then stops the others).
#pragma once

#include <cstdio>
#include <cstdlib>

#include "hb.h"

// Set by the program once it knows its rank; its name prefixes messages.
extern int g_mp_rank;
extern const char *g_mp_name;

#define CHECK(cond, ...)                                              \
  do {                                                                \
    if (!(cond)) {                                                    \
      std::fprintf(stderr, "[%s r%d] FAILED at line %d: ", g_mp_name, \
                   g_mp_rank, __LINE__);                              \
      std::fprintf(stderr, __VA_ARGS__);                              \
      std::fprintf(stderr, "\n");                                     \
      std::exit(1);                                                   \
    }                                                                 \
  } while (0)

#define CHECK_OK(call)                                            \
  do {                                                            \
    hb_status st_ = (call);                                       \
    CHECK(st_ == HB_OK, "%s: %s: %s", #call, hb_status_name(st_), \
          hb_last_error());                                       \
  } while (0)
