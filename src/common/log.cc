#include "common/log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace hb {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kWarn)};
std::atomic<int> g_rank{-1};
const char *const kNames[] = {"ERROR", "WARN", "INFO", "DEBUG"};
}  // namespace

void set_log_level(LogLevel level) { g_level = static_cast<int>(level); }
LogLevel log_level() { return static_cast<LogLevel>(g_level.load()); }
void set_log_rank(int rank) { g_rank = rank; }

void log(LogLevel level, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  int rank = g_rank.load();
  // One fprintf per line so lines from threads do not interleave.
  if (rank >= 0)
    std::fprintf(stderr, "[hb r%d %s] %s\n", rank, kNames[static_cast<int>(level)], msg);
  else
    std::fprintf(stderr, "[hb %s] %s\n", kNames[static_cast<int>(level)], msg);
}

}  // namespace hb
