// What a checkpoint handle has registered, as the `item` lines of the
// manifest: ranks must agree on them at a save, and a restore refuses a
// checkpoint whose items differ (naming the first difference).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

struct hb_checkpoint;

namespace hb {
namespace recovery {

// One line per registered thing: "table <name> dim <d> num_rows <n>
// optimizer <o> record_words <w>", "buffer <name> replicated <bytes>",
// "buffer <name> per_rank", "reader <i>", "metric <name> kind <k> config
// <fingerprint>".
std::vector<std::string> registry_items(const hb_checkpoint &c);
uint64_t registry_fingerprint(const std::vector<std::string> &items);
// HB_ERR_INVALID_ARGUMENT naming the first item that differs.
void check_same_items(const std::vector<std::string> &saved,
                      const std::vector<std::string> &mine,
                      const std::string &ckpt);

}  // namespace recovery
}  // namespace hb
