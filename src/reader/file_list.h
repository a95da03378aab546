// Paths and glob patterns -> the reader's files, each checked readable, with
// its size and whether it is gzip (by its magic bytes, not its name).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hb {
namespace reader {

struct FileInfo {
  std::string path;
  int64_t size = 0;  // bytes on disk (compressed size for gzip)
  bool gzip = false;
};

// Each pattern's matches in sorted order, patterns in the given order. A
// missing or unreadable file, a directory, or a pattern matching nothing is
// HB_ERR_IO naming it.
std::vector<FileInfo> expand_files(const char *const *paths, size_t n);

}  // namespace reader
}  // namespace hb
