// What a checkpoint handle has registered, as the `item` lines of the
// manifest: ranks must agree on them at a save, and a restore refuses a
// checkpoint whose items differ (naming the first difference).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/mismatch.h"

struct hb_checkpoint;
struct hb_embedding;

namespace hb {
namespace recovery {

// Registration (hb_checkpoint_add_table / _add_buffer, and the evaluator's):
// checks the arguments, naming fn.
void add_table(hb_checkpoint &c, hb_embedding *emb, const char *fn);
void add_buffer(hb_checkpoint &c, const char *fn, const char *name, void *data,
                size_t bytes, int32_t flags);

// One line per registered thing: "table <name> dim <d> num_rows <n>
// optimizer <o> record_words <w>", "buffer <name> replicated <bytes>",
// "buffer <name> per_rank", "reader <i>", "metric <name> kind <k> config
// <fingerprint>".
std::vector<std::string> registry_items(const hb_checkpoint &c);
uint64_t registry_fingerprint(const std::vector<std::string> &items);
// The same, one field per line ("registered[i]") and each metric's config
// fields by name: what a mismatch between ranks describes.
ConfigFields registry_fields(const hb_checkpoint &c);
// HB_ERR_INVALID_ARGUMENT naming the first item that differs.
void check_same_items(const std::vector<std::string> &saved,
                      const std::vector<std::string> &mine,
                      const std::string &ckpt);
// A follower's check: each of mine is among saved (the same line);
// HB_ERR_INVALID_ARGUMENT naming the first that is not, and what the
// checkpoint has under that name instead.
void check_items_present(const std::vector<std::string> &saved,
                         const std::vector<std::string> &mine,
                         const std::string &ckpt);

}  // namespace recovery
}  // namespace hb
