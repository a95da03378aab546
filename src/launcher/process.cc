#include "launcher/process.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "abi/error.h"

namespace hb {
namespace launcher {
namespace {

bool is_executable_file(const std::string &p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         ::access(p.c_str(), X_OK) == 0;
}

void make_pipe(int fds[2]) {
  if (::pipe2(fds, O_CLOEXEC) != 0)
    fail(HB_ERR_IO, "pipe2: %s", std::strerror(errno));
}

void close_fd(int *fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

// Reports errno through the exec-error pipe and ends the child.
[[noreturn]] void child_fail(int report_fd, int err) {
  ssize_t ignored = ::write(report_fd, &err, sizeof err);
  (void)ignored;
  ::_exit(127);
}

// Runs in the forked child: only async-signal-safe calls until execve.
// On failure writes errno to report_fd and exits 127.
[[noreturn]] void exec_child(const SpawnRequest &req, char *const *argv,
                             char *const *envp, const cpu_set_t *cpus,
                             pid_t parent, int out_w, int err_w,
                             int report_fd) {
  ::setpgid(0, 0);
  if (cpus && ::sched_setaffinity(0, sizeof *cpus, cpus) != 0)
    child_fail(report_fd, errno);
  // The kernel kills the worker if hbrun dies, even by SIGKILL. If hbrun
  // died before this line, the parent is already someone else.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent)
    ::_exit(127);
  // hbrun ignores SIGPIPE and catches others; the program starts clean.
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGQUIT})
    ::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (!req.inherit_stdin) {
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull < 0 || ::dup2(devnull, 0) < 0) child_fail(report_fd, errno);
    if (devnull != 0) ::close(devnull);
  }
  if (out_w >= 0 && ::dup2(out_w, 1) < 0) child_fail(report_fd, errno);
  if (err_w >= 0 && ::dup2(err_w, 2) < 0) child_fail(report_fd, errno);
  ::execve(req.path.c_str(), argv, envp);
  child_fail(report_fd, errno);
}

std::vector<char *> c_strings(const std::vector<std::string> &v) {
  std::vector<char *> out;
  for (const auto &s : v) out.push_back(const_cast<char *>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::string find_program(const std::string &program, const char *path_env) {
  if (program.empty()) fail(HB_ERR_INVALID_ARGUMENT, "empty program name");
  if (program.find('/') != std::string::npos) {
    if (::access(program.c_str(), F_OK) != 0)
      fail(HB_ERR_INVALID_ARGUMENT, "program '%s' not found", program.c_str());
    if (!is_executable_file(program))
      fail(HB_ERR_PERMISSION, "program '%s' is not an executable file",
           program.c_str());
    return program;
  }
  std::string path = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= path.size()) {
    size_t colon = path.find(':', start);
    if (colon == std::string::npos) colon = path.size();
    std::string dir = path.substr(start, colon - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (is_executable_file(candidate)) return candidate;
    start = colon + 1;
  }
  fail(HB_ERR_INVALID_ARGUMENT, "program '%s' not found in PATH",
       program.c_str());
}

SpawnedProcess spawn_process(const SpawnRequest &req) {
  int out[2] = {-1, -1}, err[2] = {-1, -1}, report[2] = {-1, -1};
  SpawnedProcess p;
  try {
    if (req.capture_output) {
      make_pipe(out);
      make_pipe(err);
    }
    make_pipe(report);
  } catch (...) {
    for (int *fd : {&out[0], &out[1], &err[0], &err[1], &report[0], &report[1]})
      close_fd(fd);
    throw;
  }
  // Everything the child needs is built before fork: it may not allocate.
  std::vector<char *> argv = c_strings(req.argv), envp = c_strings(req.env);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int c : req.cpus)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &cpus);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0)
    exec_child(req, argv.data(), envp.data(),
               req.cpus.empty() ? nullptr : &cpus, parent, out[1], err[1],
               report[1]);
  int fork_errno = errno;
  for (int *fd : {&out[1], &err[1], &report[1]}) close_fd(fd);
  if (pid < 0) {
    for (int *fd : {&out[0], &err[0], &report[0]}) close_fd(fd);
    fail(HB_ERR_IO, "fork for '%s': %s", req.path.c_str(),
         std::strerror(fork_errno));
  }
  // Also set it here: signal_group may run before the child gets that far.
  ::setpgid(pid, pid);
  // The report pipe closes on a successful exec (close-on-exec) or carries
  // the errno of the failure.
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(report[0], &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  close_fd(&report[0]);
  if (n > 0) {
    int status;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    close_fd(&out[0]);
    close_fd(&err[0]);
    fail(HB_ERR_IO, "cannot run '%s': %s", req.path.c_str(),
         std::strerror(child_errno));
  }
  for (int fd : {out[0], err[0]})
    if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  p.pid = pid;
  p.stdout_fd = out[0];
  p.stderr_fd = err[0];
  return p;
}

void signal_group(pid_t pid, int sig) {
  if (pid > 0) ::kill(-pid, sig);
}

int exit_code_of(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

std::string describe_wait_status(int wait_status) {
  if (WIFEXITED(wait_status))
    return format("exited with status %d", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status))
    return format("was killed by signal %d (%s)", WTERMSIG(wait_status),
                  strsignal(WTERMSIG(wait_status)));
  return format("ended with wait status 0x%x", wait_status);
}

}  // namespace launcher
}  // namespace hb
