#include "launcher/hbrun_runner.h"

#include "common/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include "launcher/process.h"

extern char **environ;

namespace hb_test {
namespace {

double now_s() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool drops(const std::string &kv) {
  for (const char *p : {"CUDA_VISIBLE_DEVICES=", "NVIDIA_VISIBLE_DEVICES=",
                        "TF_CONFIG=", "HB_"})
    if (kv.compare(0, std::strlen(p), p) == 0) return true;
  return false;
}

std::vector<std::string> test_environment(const EnvChanges &changes) {
  std::vector<std::string> env;
  for (char **e = environ; *e; ++e) {
    std::string kv = *e;
    std::string name = kv.substr(0, kv.find('='));
    if (!drops(kv) && !changes.count(name)) env.push_back(kv);
  }
  for (const auto &c : changes)
    if (c.second) env.push_back(c.first + "=" + *c.second);
  return env;
}

}  // namespace

HbrunProcess::HbrunProcess(const std::vector<std::string> &args,
                           const EnvChanges &env) {
  hb::launcher::SpawnRequest req;
  req.path = HBRUN_PATH;
  req.argv.push_back(HBRUN_PATH);
  req.argv.insert(req.argv.end(), args.begin(), args.end());
  req.env = test_environment(env);
  start_ = now_s();
  hb::launcher::SpawnedProcess p = hb::launcher::spawn_process(req);
  pid_ = p.pid;
  out_fd_ = p.stdout_fd;
  err_fd_ = p.stderr_fd;
}

HbrunProcess::~HbrunProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  for (int fd : {out_fd_, err_fd_})
    if (fd >= 0) ::close(fd);
}

bool HbrunProcess::pump(int timeout_ms) {
  pollfd fds[2];
  int n = 0;
  std::string *dst[2];
  int *src[2];
  for (auto pair : {std::make_pair(&out_fd_, &result_.out),
                    std::make_pair(&err_fd_, &result_.err)}) {
    if (*pair.first < 0) continue;
    fds[n] = pollfd{*pair.first, POLLIN, 0};
    src[n] = pair.first;
    dst[n++] = pair.second;
  }
  if (n == 0) return false;
  if (::poll(fds, n, timeout_ms) <= 0) return true;
  for (int i = 0; i < n; ++i) {
    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    char buf[65536];
    ssize_t r;
    while ((r = ::read(*src[i], buf, sizeof buf)) > 0) dst[i]->append(buf, r);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
      ::close(*src[i]);
      *src[i] = -1;
    }
  }
  return true;
}

bool HbrunProcess::read_until(
    const std::function<bool(const std::string &)> &pred, double timeout_s) {
  double end = now_s() + timeout_s;
  while (!pred(result_.out)) {
    if (now_s() >= end) return false;
    if (!pump(50) && !pred(result_.out)) return false;
  }
  return true;
}

RunResult HbrunProcess::wait(double timeout_s) {
  double end = now_s() + timeout_s;
  int status = 0;
  for (;;) {
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) break;
    if (now_s() >= end) {
      result_.timed_out = true;
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    if (!pump(20)) ::usleep(5000);
  }
  result_.seconds = now_s() - start_;
  pid_ = -1;
  // hbrun is gone; collect what its pipes still hold (bounded: a worker it
  // left behind could keep them open).
  double drain_end = now_s() + 2;
  while (now_s() < drain_end && pump(50)) {
  }
  result_.exit_code = hb::launcher::exit_code_of(status);
  return result_;
}

RunResult run_hbrun(const std::vector<std::string> &args, const EnvChanges &env,
                    double timeout_s) {
  HbrunProcess p(args, env);
  return p.wait(timeout_s);
}

int free_port() {
  const int port = hb::free_port("127.0.0.1", 0);
  if (port == 0)
    throw std::runtime_error(std::string("free_port: ") + std::strerror(errno));
  return port;
}

std::vector<std::string> split_lines(const std::string &s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < s.size()) {
    size_t nl = s.find('\n', start);
    if (nl == std::string::npos) nl = s.size();
    out.push_back(s.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

int count_line(const std::string &s, const std::string &line) {
  int n = 0;
  for (const auto &l : split_lines(s)) n += l == line;
  return n;
}

}  // namespace hb_test
