// How many of hb's shared-memory segments (/dev/shm/hb-<pid>-*) exist now
// that processes in `pids` made; other programs' entries, and those of
// tests running beside this one, do not count.
#pragma once

#include <dirent.h>
#include <sys/types.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace hb {
namespace test {

inline int hb_segments(const std::vector<pid_t> &pids) {
  int n = 0;
  if (DIR *d = opendir("/dev/shm")) {
    while (dirent *e = readdir(d)) {
      int pid = 0;
      n += std::sscanf(e->d_name, "hb-%d-", &pid) == 1 &&
           std::find(pids.begin(), pids.end(), pid_t(pid)) != pids.end();
    }
    closedir(d);
  }
  return n;
}

}  // namespace test
}  // namespace hb
