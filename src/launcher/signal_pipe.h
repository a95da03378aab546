// Turns SIGCHLD, SIGINT, SIGTERM and SIGHUP into bytes on a pipe (the
// self-pipe trick), so hbrun's poll() loop handles them in order, outside
// any signal handler. SIGPIPE is ignored (a closed stdout must not kill
// hbrun while its workers run).
#pragma once

namespace hb {
namespace launcher {

// Installs the handlers (once) and returns the non-blocking read end.
// Each byte read is a signal number.
int install_signal_pipe();

}  // namespace launcher
}  // namespace hb
