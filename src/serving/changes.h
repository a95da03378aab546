// What a delta export reads from a table's change stamps (src/lifecycle):
// the table's write clock, the rows written after a clock value, and the
// ids evicted after it.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "embedding/table.h"

namespace hb {
namespace serving {

// The table's write clock now: every row written so far has a stamp <= it,
// every later write a larger one.
uint64_t write_clock(emb::Table &t);

// Calls f(id, record) for every row of this rank's shard created or
// updated after clock `since`.
void rows_changed_since(emb::Table &t, uint64_t since,
                        const std::function<void(int64_t, const float *)> &f);

// The ids this rank evicted after `since` that it does not hold now.
std::vector<int64_t> evicted_since(emb::Table &t, uint64_t since);

// Lets the table drop what it logged of evictions at or before `since`
// (no delta will start earlier).
void retain_evictions_since(emb::Table &t, uint64_t since);

}  // namespace serving
}  // namespace hb
