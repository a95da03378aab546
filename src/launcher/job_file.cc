#include "launcher/job_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "abi/error.h"

namespace hb {
namespace launcher {
namespace {

// An open, flock()ed job file; closed (and unlocked) on scope exit.
class LockedFile {
 public:
  LockedFile(const std::string &path, int flags, int lock) : path_(path) {
    fd_ = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
    if (fd_ < 0) return;
    while (::flock(fd_, lock) != 0 && errno == EINTR) {
    }
  }
  ~LockedFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const { return fd_; }

  std::string read_all() const {
    std::string s;
    char buf[4096];
    ::lseek(fd_, 0, SEEK_SET);
    ssize_t n;
    while ((n = ::read(fd_, buf, sizeof buf)) > 0) s.append(buf, size_t(n));
    return s;
  }

  void replace(const std::string &text) const {
    // Readers hold the lock too, so truncating in place is safe.
    if (::ftruncate(fd_, 0) != 0 || ::lseek(fd_, 0, SEEK_SET) != 0 ||
        ::write(fd_, text.data(), text.size()) !=
            static_cast<ssize_t>(text.size()))
      fail(HB_ERR_IO, "cannot write the job file %s: %s", path_.c_str(),
           std::strerror(errno));
  }

 private:
  std::string path_;
  int fd_ = -1;
};

std::string format_info(const JobInfo &info) {
  std::ostringstream o;
  o << "pid=" << info.pid << "\nps_hosts=" << info.ps_hosts
    << "\nworld=" << info.world << "\nnext_rank=" << info.next_rank
    << "\njoined=";
  for (size_t i = 0; i < info.joined.size(); ++i)
    o << (i ? "," : "") << info.joined[i];
  o << "\n";
  return o.str();
}

long parse_long(const std::string &path, const std::string &key,
                const std::string &v) {
  char *end = nullptr;
  errno = 0;
  long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || x < 0)
    fail(HB_ERR_CONFIG, "job file %s: %s=%s is not a count", path.c_str(),
         key.c_str(), v.c_str());
  return x;
}

JobInfo parse_info(const std::string &path, const std::string &text) {
  JobInfo info;
  std::istringstream in(text);
  std::string line;
  bool has_pid = false, has_hosts = false;
  while (std::getline(in, line)) {
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string k = line.substr(0, eq), v = line.substr(eq + 1);
    if (k == "pid") {
      info.pid = parse_long(path, k, v);
      has_pid = true;
    } else if (k == "ps_hosts") {
      info.ps_hosts = v;
      has_hosts = !v.empty();
    } else if (k == "world") {
      info.world = static_cast<int>(parse_long(path, k, v));
    } else if (k == "next_rank") {
      info.next_rank = static_cast<int>(parse_long(path, k, v));
    } else if (k == "joined") {
      std::istringstream list(v);
      std::string item;
      while (std::getline(list, item, ','))
        if (!item.empty()) info.joined.push_back(parse_long(path, k, item));
    }
  }
  if (!has_pid || !has_hosts || info.next_rank < info.world)
    fail(HB_ERR_CONFIG,
         "job file %s is not one hbrun --ps wrote (it needs pid, ps_hosts, "
         "world and next_rank)",
         path.c_str());
  return info;
}

// The file of a running job, locked; throws naming the job when there is
// none.
JobInfo read_locked(const LockedFile &f, const std::string &job,
                    const std::string &path) {
  if (f.fd() < 0)
    fail(HB_ERR_CONFIG,
         "no running hbrun --ps job '%s': cannot open its job file %s (%s); "
         "hbrun --ps writes it while the job runs (HB_JOB_DIR, else TMPDIR, "
         "else /tmp)",
         job.c_str(), path.c_str(), std::strerror(errno));
  JobInfo info = parse_info(path, f.read_all());
  if (!process_alive(info.pid))
    fail(HB_ERR_CONFIG,
         "job '%s' is not running: its hbrun (pid %ld) is gone (a stale job "
         "file %s)",
         job.c_str(), info.pid, path.c_str());
  return info;
}

}  // namespace

bool process_alive(long pid) {
  return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

std::string job_dir() {
  for (const char *name : {"HB_JOB_DIR", "TMPDIR"}) {
    const char *v = std::getenv(name);
    if (v && *v) return v;
  }
  return "/tmp";
}

std::string job_file_path(const std::string &job) {
  bool id =
      !job.empty() && job.find_first_not_of("0123456789") == std::string::npos;
  return id ? job_dir() + "/hbrun-" + job + ".job" : job;
}

void write_job_file(const std::string &path, const JobInfo &info) {
  LockedFile f(path, O_RDWR | O_CREAT, LOCK_EX);
  if (f.fd() < 0)
    fail(HB_ERR_IO, "cannot create the job file %s: %s", path.c_str(),
         std::strerror(errno));
  JobInfo fresh = info;
  fresh.next_rank = info.world;
  // Joiners of an earlier start may still run (until the new ps tasks'
  // absence fails them): the job keeps waiting for them.
  JobInfo old;
  try {
    old = parse_info(path, f.read_all());
    fresh.joined = old.joined;
  } catch (const Error &) {
    // A new file (or a foreign one, which this job now owns).
  }
  f.replace(format_info(fresh));
}

JobInfo join_job(const std::string &job, int count, long joiner_pid) {
  const std::string path = job_file_path(job);
  LockedFile f(path, O_RDWR, LOCK_EX);
  JobInfo info = read_locked(f, job, path);
  JobInfo next = info;
  next.next_rank += count;
  next.joined.push_back(joiner_pid);
  f.replace(format_info(next));
  return info;
}

JobInfo read_job_file(const std::string &job) {
  const std::string path = job_file_path(job);
  LockedFile f(path, O_RDONLY, LOCK_SH);
  return read_locked(f, job, path);
}

bool joiners_running(const std::string &path) {
  LockedFile f(path, O_RDONLY, LOCK_SH);
  if (f.fd() < 0) return false;
  try {
    for (long pid : parse_info(path, f.read_all()).joined)
      if (process_alive(pid)) return true;
  } catch (const Error &) {
  }
  return false;
}

}  // namespace launcher
}  // namespace hb
