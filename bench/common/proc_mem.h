// Shared by the benchmarks: this process's resident memory (Linux /proc).
#pragma once

#include <cstdio>
#include <cstring>

namespace hbbench {

// A "Name: N kB" line of /proc/self/status, in KiB; -1 when unknown.
inline long status_kib(const char *name) {
  FILE *f = std::fopen("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  const size_t n = std::strlen(name);
  while (f && std::fgets(line, sizeof line, f))
    if (std::strncmp(line, name, n) == 0 && line[n] == ':' &&
        std::sscanf(line + n + 1, "%ld", &kib) == 1)
      break;
  if (f) std::fclose(f);
  return kib;
}

// Peak resident set (VmHWM) and current resident set (VmRSS).
inline long peak_rss_kib() { return status_kib("VmHWM"); }
inline long rss_kib() { return status_kib("VmRSS"); }

}  // namespace hbbench
