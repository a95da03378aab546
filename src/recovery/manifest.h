// A job checkpoint's MANIFEST: written last (by rank 0, atomically), it is
// what makes a ckpt-* directory a checkpoint. Text, one record per line,
// closed by a checksum of everything before it:
//
//   hb-job-checkpoint 1
//   job <hex of the job id>
//   step <n>            world <w>    (one per line)
//   nonce <hex>         saved_ns <wall-clock ns, orders saves of one step>
//   item <what was registered, registry.h>
//   meta <hex key> <hex value>
//   file <rank> <path in the directory> <bytes> <checksum hex>
//   checksum <hex>
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace hb {
namespace recovery {

struct FileEntry {
  int rank = 0;      // who wrote it
  std::string path;  // relative to the checkpoint directory
  uint64_t bytes = 0, checksum = 0;
};

struct Manifest {
  std::string job;
  int64_t step = 0;
  int32_t world = 0;
  uint64_t nonce = 0;
  int64_t saved_ns = 0;
  std::vector<std::string> items;
  std::map<std::string, std::string> meta;
  std::vector<FileEntry> files;
};

std::string render_manifest(const Manifest &m);
// HB_ERR_CORRUPT naming path for anything malformed (truncated, checksum).
Manifest parse_manifest(const std::string &path, const std::string &text);
// Reads and parses <ckpt>/MANIFEST (HB_ERR_CORRUPT when missing too).
Manifest read_manifest(const std::string &ckpt);

// The entry of `rel` or nullptr.
const FileEntry *find_file(const Manifest &m, const std::string &rel);

// Reads a file the manifest names, checking its size and checksum:
// HB_ERR_CORRUPT naming it when missing, short or different.
std::string read_checked(const std::string &ckpt, const FileEntry &e);
// Checks the files i with i % stride == offset (size and checksum).
void verify_files(const std::string &ckpt, const Manifest &m, int offset,
                  int stride);
// Every file present with its size (no checksums): cheap.
bool files_present(const std::string &ckpt, const Manifest &m,
                   std::string *why);

std::string hex_encode(const std::string &s);

}  // namespace recovery
}  // namespace hb
