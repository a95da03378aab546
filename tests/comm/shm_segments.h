// hb's shared-memory segments (/dev/shm/hb-<pid>-*) that exist now and that
// processes in `pids` made; other programs' entries, and those of tests
// running beside this one, do not count.
//
// since: only segments created at or after this time (time(nullptr) taken
// before the processes started). A rank killed while a world forms leaves
// its name behind by design (comm/shm_transport.cc removes such names
// after 10 minutes), e.g. every victim of connect_kill_test; on a machine
// whose process ids wrap (32768 here, with several suites running), a
// later test's rank can get that dead process's id, and its stale name
// then looked like the rank's own.
#pragma once

#include <dirent.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

namespace hb {
namespace test {

inline std::vector<std::string> hb_segment_names(const std::vector<pid_t> &pids,
                                                 time_t since = 0) {
  std::vector<std::string> names;
  if (DIR *d = opendir("/dev/shm")) {
    while (dirent *e = readdir(d)) {
      int pid = 0;
      if (std::sscanf(e->d_name, "hb-%d-", &pid) != 1 ||
          std::find(pids.begin(), pids.end(), pid_t(pid)) == pids.end())
        continue;
      struct stat st;
      const std::string path = std::string("/dev/shm/") + e->d_name;
      // A name unlinked meanwhile is gone, as counted.
      if (stat(path.c_str(), &st) == 0 && st.st_ctime >= since)
        names.push_back(e->d_name);
    }
    closedir(d);
  }
  return names;
}

inline int hb_segments(const std::vector<pid_t> &pids, time_t since = 0) {
  return int(hb_segment_names(pids, since).size());
}

}  // namespace test
}  // namespace hb
