// Where a job checkpoint's files live (docs/fault-tolerance.md, "Layout"):
//
//   <root>/JOB                                   the job id
//   <root>/ckpt-<step, 12 digits>-<nonce>/       one checkpoint
//       MANIFEST                                 written last, by rank 0
//       tables/<name>.manifest, <name>.<nonce>.shard-<r>-of-<w>
//       buffers/<name>, buffers/<name>.rank-<r>
//       readers/reader-<i>.rank-<r>
//       metrics/<name>.rank-<r>
//
// A ckpt-* directory without a valid MANIFEST is not a checkpoint.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hb {
namespace recovery {

std::string join_path(const std::string &dir, const std::string &name);
std::string checkpoint_dir_name(int64_t step, uint64_t nonce);
// The step of a ckpt-* name; false for any other name.
bool parse_checkpoint_dir_name(const std::string &name, int64_t *step);

// The ckpt-* directories of root (full paths), any order.
std::vector<std::string> list_checkpoint_dirs(const std::string &root);

std::string table_dir(const std::string &ckpt);
std::string replicated_buffer_file(const std::string &name);
std::string rank_file(const std::string &folder, const std::string &name,
                      int rank);

// Names of registered things become file names: 1-64 of [A-Za-z0-9._-],
// not "." or "..". HB_ERR_INVALID_ARGUMENT naming `what` otherwise.
void check_name(const char *what, const char *name);

// The JOB file: its id (HB_ERR_IO when unreadable); "written" false when
// missing.
bool read_job_file(const std::string &root, std::string *job);
void write_job_file(const std::string &root, const std::string &job);

// The FINISHED mark (hb_checkpoint_finish): the job's last committed step.
// read_finished_file: false when there is none.
bool read_finished_file(const std::string &root, int64_t *step);
void write_finished_file(const std::string &root, int64_t step);
void remove_finished_file(const std::string &root);

// rm -r of a checkpoint directory; a warning (not an error) on failure.
void remove_tree(const std::string &path);

}  // namespace recovery
}  // namespace hb
