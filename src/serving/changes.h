// What a delta export reads from a table's write stamps
// (lifecycle/row_meta.h): an export seals the table's write epoch; the rows
// written after an export that sealed epoch e are those stamped > e, and
// the ids evicted after it are the log entries stamped > e.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "embedding/table.h"

namespace hb {
namespace serving {

// Turns on write stamps and the evicted-id log (first call), closes the
// current write epoch and returns it. Call on every rank at the same point
// of the table's call sequence.
uint64_t seal_writes(emb::Table &t);

// The oldest sealed epoch a delta may start from (a load replaced every
// row after it).
uint64_t oldest_delta_base(const emb::Table &t);

// Calls f(id, record) for every row of this rank's shard created or
// updated after epoch `since`.
void rows_changed_since(const emb::Table &t, uint64_t since,
                        const std::function<void(int64_t, const float *)> &f);

// The ids this rank evicted after `since` and does not hold now
// (ascending, each once).
std::vector<int64_t> evicted_since(const emb::Table &t, uint64_t since);

// Drops the logged evictions at or before `since` (no delta will start
// earlier).
void retain_evictions_since(emb::Table &t, uint64_t since);

}  // namespace serving
}  // namespace hb
