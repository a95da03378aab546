#include "common/fd_limit.h"

#include <sys/resource.h>

#include <mutex>

#include "common/log.h"

namespace hb {

size_t raise_fd_limit(size_t wanted) {
  static std::mutex mu;  // getrlimit + setrlimit as one step
  std::lock_guard<std::mutex> lock(mu);
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return 0;
  if (r.rlim_cur != RLIM_INFINITY && r.rlim_cur < wanted) {
    const rlim_t old = r.rlim_cur;
    r.rlim_cur = r.rlim_max == RLIM_INFINITY || r.rlim_max > wanted
                     ? rlim_t(wanted)
                     : r.rlim_max;
    if (r.rlim_cur > old && setrlimit(RLIMIT_NOFILE, &r) == 0)
      HB_LOG_INFO(
          "raised the open-file soft limit from %llu to %llu for %zu "
          "descriptors",
          static_cast<unsigned long long>(old),
          static_cast<unsigned long long>(r.rlim_cur), wanted);
    else
      r.rlim_cur = old;
    if (r.rlim_cur < wanted)
      HB_LOG_WARN(
          "this process may need %zu open files, but its hard limit "
          "is %llu (raise it: ulimit -Hn)",
          wanted, static_cast<unsigned long long>(r.rlim_max));
  }
  return r.rlim_cur == RLIM_INFINITY ? size_t(-1) : size_t(r.rlim_cur);
}

}  // namespace hb
