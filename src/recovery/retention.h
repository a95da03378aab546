// Which checkpoints stay: after each commit rank 0 keeps the `keep` newest
// complete checkpoints of the job (by step, then save time) and removes the
// older ones and every ckpt-* directory without a valid MANIFEST (a save
// that crashed). The newest complete checkpoint is never removed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hb {
namespace recovery {

struct Candidate {
  std::string path;
  int64_t step = 0;
  int64_t saved_ns = 0;
};

// The complete checkpoints of root (a MANIFEST that parses), newest first;
// the others (incomplete or unparsable) in *incomplete when not NULL.
std::vector<Candidate> complete_checkpoints(
    const std::string &root, std::vector<std::string> *incomplete);

void apply_retention(const std::string &root, int keep,
                     const std::string &current);

}  // namespace recovery
}  // namespace hb
