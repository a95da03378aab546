// Restores a job checkpoint (collective, on the training thread):
//
// 1. which checkpoint: rank 0 lists the complete ones, newest first, and
//    proposes them in turn; every rank checks the proposal (the job id, the
//    registered items, and the sizes and checksums of its share of the
//    files: file i on rank i % world) and the ranks agree. A damaged one
//    (HB_ERR_CORRUPT on any rank) is passed over with a warning; another
//    job's or other registrations' is refused.
// 2. staging: every rank reads what it restores (buffers, reader states,
//    metric states) into memory and checks it; the ranks agree, so a bad
//    file changes nothing.
// 3. tables load (each collective and all-or-nothing, re-sharding), then
//    the staged state is swapped in.
#pragma once

#include <cstdint>
#include <string>

struct hb_checkpoint;

namespace hb {
struct Outcome;
}  // namespace hb

namespace hb {
namespace recovery {

// Rank 0's string s on every rank, once every rank agrees on o (rank 0's
// outcome in producing it; its failure is thrown on every rank).
std::string from_rank0(hb_checkpoint &c, const Outcome &o, const std::string &s,
                       const char *what);

// The step restored, or -1 when the directory has no checkpoint.
int64_t restore_latest(hb_checkpoint &c);
int64_t restore_path(hb_checkpoint &c, const std::string &path);

}  // namespace recovery
}  // namespace hb
