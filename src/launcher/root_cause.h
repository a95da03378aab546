// Which failed worker caused a job's failure. When a rank dies, the ranks
// that were talking to it fail with HB_ERR_PEER_FAILED and may exit before
// hbrun has reaped the first one (or in the same wake-up, where waitpid's
// order says nothing). The rendezvous store sees the ranks leave in the
// order they went, so hbrun reports the first of them to fail, as
// torchrun's agent reports the root cause rather than the last symptom.
#pragma once

#include <mutex>
#include <string>
#include <vector>

namespace hb {
namespace launcher {

// The order in which the store saw ranks leave (lost, BYE or ABORT), and
// which ranks joined it (formed the collective world) since the last
// clear(). Thread-safe: the store's thread appends, the supervisor reads.
class DepartureLog {
 public:
  void add(int rank);
  std::vector<int> order() const;
  void add_join(int rank);
  // Whether rank joined the store's world: its loss breaks that world for
  // every rank, so in ps mode it cannot be restarted alone.
  bool joined(int rank) const;
  void clear();

 private:
  mutable std::mutex mu_;
  std::vector<int> ranks_;
  std::vector<int> joined_;
};

struct WorkerFailure {
  std::string label;     // the output prefix ("2", "ps:0")
  int rank = -1;         // -1: not a rank of the world
  int code = 0;          // its exit code (128 + signal), never 0
  std::string how;       // "was killed by signal 6 (Aborted)"
  bool ps_task = false;  // hbrun --ps: one of the job's ps tasks
};

// Index into `reaped` (failures in the order hbrun reaped them, non-empty)
// of the root cause: the first one reaped, unless it left the store after
// another failed worker did; then the failed worker that left it first.
// A first-reaped worker the store never saw leave (it died before joining,
// or is not a rank) stays the root cause.
size_t root_cause(const std::vector<WorkerFailure> &reaped,
                  const std::vector<int> &departures);

}  // namespace launcher
}  // namespace hb
