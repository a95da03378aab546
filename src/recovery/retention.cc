#include "recovery/retention.h"

#include <algorithm>

#include "abi/error.h"
#include "common/log.h"
#include "recovery/layout.h"
#include "recovery/manifest.h"

namespace hb {
namespace recovery {

std::vector<Candidate> complete_checkpoints(
    const std::string &root, std::vector<std::string> *incomplete) {
  std::vector<Candidate> out;
  for (const std::string &dir : list_checkpoint_dirs(root)) {
    try {
      Manifest m = read_manifest(dir);
      out.push_back({dir, m.step, m.saved_ns});
    } catch (const Error &) {
      if (incomplete) incomplete->push_back(dir);
    }
  }
  std::sort(out.begin(), out.end(), [](const Candidate &a, const Candidate &b) {
    return a.step != b.step ? a.step > b.step : a.saved_ns > b.saved_ns;
  });
  return out;
}

void apply_retention(const std::string &root, int keep,
                     const std::string &current) {
  std::vector<std::string> incomplete;
  std::vector<Candidate> complete = complete_checkpoints(root, &incomplete);
  // Only this job's directory is ever passed here (the JOB file was checked
  // when the handle was created), and only ckpt-* entries are touched.
  for (const std::string &dir : incomplete)
    if (dir != current) remove_tree(dir);
  for (size_t i = static_cast<size_t>(std::max(keep, 1)); i < complete.size();
       ++i) {
    if (complete[i].path == current) continue;
    HB_LOG_DEBUG("job checkpoint: removing '%s' (keep %d)",
                 complete[i].path.c_str(), keep);
    remove_tree(complete[i].path);
  }
}

}  // namespace recovery
}  // namespace hb
