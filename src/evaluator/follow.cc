#include "evaluator/follow.h"

#include <cstdlib>

#include "abi/error.h"
#include "recovery/layout.h"
#include "recovery/retention.h"

namespace hb {
namespace evaluator {

Next look(const std::string &root, const std::string &job, int64_t last_step) {
  Next n;
  std::string owner;
  if (!recovery::read_job_file(root, &owner)) return n;
  if (owner != job)
    fail(HB_ERR_INVALID_ARGUMENT,
         "hb_evaluator: '%s' holds the checkpoints of job '%s'; this "
         "evaluator follows job '%s'",
         root.c_str(), owner.c_str(), job.c_str());
  int64_t final_step = -1;
  bool finished = recovery::read_finished_file(root, &final_step);
  // Newest first: the last one above last_step is the oldest such.
  for (const recovery::Candidate &c :
       recovery::complete_checkpoints(root, nullptr)) {
    if (c.step <= last_step) break;
    n.kind = Next::kLoad;
    n.path = c.path;
    n.step = c.step;
  }
  if (n.kind == Next::kWait && finished) n.kind = Next::kEnd;
  return n;
}

std::string encode(const Next &n) {
  return format("%d %lld %s", static_cast<int>(n.kind),
                static_cast<long long>(n.step), n.path.c_str());
}

Next decode(const std::string &s) {
  Next n;
  char *end = nullptr;
  n.kind = static_cast<Next::Kind>(std::strtol(s.c_str(), &end, 10));
  n.step = std::strtoll(end, &end, 10);
  if (*end == ' ') n.path = end + 1;
  return n;
}

}  // namespace evaluator
}  // namespace hb
