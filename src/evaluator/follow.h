// Which checkpoint an evaluator loads next (rank 0 decides, every rank
// follows): the oldest complete checkpoint of the job whose step is above
// the last one evaluated -- so none is skipped while `keep` retains them --
// or the end, once the job's FINISHED mark is there and nothing newer is
// left. The mark is read before the directory is listed: the last
// checkpoint commits before the mark is written, so it is never missed.
#pragma once

#include <cstdint>
#include <string>

namespace hb {
namespace evaluator {

struct Next {
  enum Kind { kWait, kLoad, kEnd } kind = kWait;
  std::string path;  // kLoad: the checkpoint directory
  int64_t step = -1;
};

// HB_ERR_INVALID_ARGUMENT when the directory belongs to another job;
// kWait while it does not exist yet.
Next look(const std::string &root, const std::string &job, int64_t last_step);

// A decision as one string (broadcast from rank 0) and back.
std::string encode(const Next &n);
Next decode(const std::string &s);

}  // namespace evaluator
}  // namespace hb
