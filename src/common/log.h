// Leveled logging to stderr, prefixed with the rank: "[hb r1 WARN] ...".
// The level comes from the log_level option (HB_LOG_LEVEL).
#pragma once

namespace hb {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

void set_log_level(LogLevel level);
LogLevel log_level();
void set_log_rank(int rank);  // -1: no rank known (yet)
void log(LogLevel level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace hb

#define HB_LOG(level, ...)                                          \
  do {                                                              \
    if (static_cast<int>(level) <= static_cast<int>(::hb::log_level())) \
      ::hb::log(level, __VA_ARGS__);                                \
  } while (0)
#define HB_LOG_ERROR(...) HB_LOG(::hb::LogLevel::kError, __VA_ARGS__)
#define HB_LOG_WARN(...) HB_LOG(::hb::LogLevel::kWarn, __VA_ARGS__)
#define HB_LOG_INFO(...) HB_LOG(::hb::LogLevel::kInfo, __VA_ARGS__)
#define HB_LOG_DEBUG(...) HB_LOG(::hb::LogLevel::kDebug, __VA_ARGS__)
