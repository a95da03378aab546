// Starting and signalling worker processes. Each worker leads its own
// process group (so a signal reaches the children it started too) and is
// killed by the kernel if hbrun dies first.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace hb {
namespace launcher {

struct SpawnRequest {
  std::string path;               // resolved executable (find_program)
  std::vector<std::string> argv;  // argv[0] included
  std::vector<std::string> env;   // "NAME=value"
  bool capture_output = true;     // stdout/stderr through pipes
  bool inherit_stdin = false;     // else stdin is /dev/null
  std::vector<int> cpus;          // sched_setaffinity to these; empty: not
};

struct SpawnedProcess {
  pid_t pid = -1;
  int stdout_fd = -1;  // read ends, non-blocking, close-on-exec (-1 when
  int stderr_fd = -1;  // not captured)
};

// The path execve() should run for `program`: itself if it names a path,
// else the first executable match in PATH. Throws HB_ERR_INVALID_ARGUMENT
// ("not found") or HB_ERR_PERMISSION ("not executable").
std::string find_program(const std::string &program, const char *path_env);

// fork + execve. Throws HB_ERR_IO with the program and errno text if the
// exec fails (the child then never ran the program).
SpawnedProcess spawn_process(const SpawnRequest &req);

// kill(-pid, sig): the worker and everything in its process group.
void signal_group(pid_t pid, int sig);

// An exit status from waitpid() as a shell reports it: the exit code, or
// 128 + the signal number.
int exit_code_of(int wait_status);
// "exited with status 3" / "was killed by signal 9 (Killed)".
std::string describe_wait_status(int wait_status);

}  // namespace launcher
}  // namespace hb
