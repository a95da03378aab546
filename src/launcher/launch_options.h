// hbrun's command line: parsed into LaunchOptions, with the help text that
// documents every option and the launch semantics.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hb {
namespace launcher {

struct LaunchOptions {
  int nproc = 0;              // -n: CPU workers; 0: one per visible GPU
  std::string host;           // --host: bind address; empty: mode default
  int port = 0;               // --port: 0 = ephemeral (or TF_CONFIG's)
  bool prefix = true;         // --no-prefix clears it
  bool use_tf_config = true;  // --no-tf-config clears it
  int64_t grace_ms = 3000;    // SIGTERM -> SIGKILL delay
  int64_t timeout_ms = 0;     // --timeout; 0 = none
  bool verbose = false;       // -v: describe the launch on stderr
  // --bind-to: "auto" (CPU workers get disjoint CPU slices when there are
  // enough CPUs), "core" (always bind, GPU workers too), "none".
  std::string bind_to = "auto";
  // --max-restarts: how often a failed job is started again (0: never); in
  // ps mode (--ps) also how often single failed workers are, all together.
  int max_restarts = 0;
  // --min-nproc: the fewest workers a restart may go on with when some
  // cannot be started again (0: all -n of them, no shrinking).
  int min_nproc = 0;
  // --evaluator: one more process, in TF_CONFIG's evaluator role, beside the
  // workers (docs/evaluator.md).
  bool evaluator = false;
  // --ps N: parameter-server mode on this machine, N ps tasks beside the
  // workers (docs/parameter-servers.md).
  int num_ps = 0;
  // --join JOB: start -n workers (default 1) into the running hbrun --ps job
  // JOB (its hbrun's pid, or its job file) instead of a job of their own.
  std::string join;
  bool help = false;
  std::vector<std::string> command;  // program and its arguments
};

// Throws hb::Error(HB_ERR_INVALID_ARGUMENT) naming the bad option or value.
LaunchOptions parse_command_line(int argc, const char *const *argv);

// The --help text.
const char *usage_text();

}  // namespace launcher
}  // namespace hb
