// What each worker rank committed on one ps task for one table -- the
// {step, k} of its last applied push and the reader position that came with
// it -- as a file beside the table's shard in a job checkpoint
// (docs/parameter-servers.md, "Checkpoints"). Restored with the rows, it
// keeps "every sample applied exactly once" across a restart from the
// checkpoint: a ps task drops the replayed pushes it already holds.
//
//   "HBPSPOS1", u32 world, then per rank: i64 step, i64 k, u32 n, n bytes
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "embedding/checkpoint.h"

namespace hb {
namespace ps {

struct Committed {
  std::vector<std::pair<int64_t, int64_t>> step;  // per rank; {-1, -1}: none
  std::vector<std::string> position;
};

// <table>.<nonce hex>.positions-<ps>-of-<num_ps>
std::string positions_file_name(const std::string &table, uint64_t nonce,
                                int ps, int num_ps);

// Written atomically into dir; its size and checksum (rows: 0).
emb::ShardFile write_positions(const std::string &dir, uint64_t nonce,
                               const std::string &table, int ps, int num_ps,
                               const Committed &c);

// The positions a ps task `ps` of `num_ps` restores from the files the
// checkpoint's `old_num_ps` tasks wrote: its own file when the count is the
// same; otherwise, per rank, the oldest of them (a sample whose rows moved
// to another ps task may then be applied again: at least once).
// HB_ERR_CORRUPT naming the file when one is missing or malformed.
Committed read_positions(const std::string &dir, uint64_t nonce,
                         const std::string &table, int ps, int num_ps,
                         int old_num_ps, int world);

}  // namespace ps
}  // namespace hb
