// Runs the built hbrun from a test: a clean environment (no GPU lists,
// TF_CONFIG or HB_* variables from the machine), its stdout and stderr
// collected separately, and a hard deadline after which it is killed.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hb_test {

// Name -> value to set, or std::nullopt to unset.
using EnvChanges = std::map<std::string, std::optional<std::string>>;

struct RunResult {
  int exit_code = -1;  // as a shell reports it (128 + signal)
  std::string out, err;
  double seconds = 0;      // from start to exit
  bool timed_out = false;  // the test's deadline, not hbrun's --timeout
};

class HbrunProcess {
 public:
  HbrunProcess(const std::vector<std::string> &args,
               const EnvChanges &env = {});
  ~HbrunProcess();  // kills hbrun if it still runs
  HbrunProcess(const HbrunProcess &) = delete;
  HbrunProcess &operator=(const HbrunProcess &) = delete;

  pid_t pid() const { return pid_; }
  // Collects output until pred(stdout so far) holds; false on timeout.
  bool read_until(const std::function<bool(const std::string &)> &pred,
                  double timeout_s);
  // Collects everything until hbrun exits; kills it after timeout_s.
  RunResult wait(double timeout_s);

 private:
  bool pump(int timeout_ms);  // false once both pipes are closed
  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1;
  double start_ = 0;
  RunResult result_;
};

RunResult run_hbrun(const std::vector<std::string> &args,
                    const EnvChanges &env = {}, double timeout_s = 60);

// A TCP port on 127.0.0.1 that was free a moment ago.
int free_port();

// Lines of s, without their newlines.
std::vector<std::string> split_lines(const std::string &s);
// How many lines of s equal line.
int count_line(const std::string &s, const std::string &line);

}  // namespace hb_test
