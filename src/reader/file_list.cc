#include "reader/file_list.h"

#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "abi/error.h"
#include "reader/byte_source.h"

namespace hb {
namespace reader {
namespace {

FileInfo probe(const std::string &path) {
  int fd = open_or_fail(path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    fail(HB_ERR_IO, "hb_reader: cannot stat '%s': %s", path.c_str(),
         std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(HB_ERR_IO, "hb_reader: '%s' is not a regular file%s", path.c_str(),
         S_ISDIR(st.st_mode) ? " (a directory)" : "");
  }
  unsigned char magic[2] = {0, 0};
  ssize_t got = ::pread(fd, magic, 2, 0);
  int e = errno;
  ::close(fd);
  if (got < 0)
    fail(HB_ERR_IO, "hb_reader: cannot read '%s': %s", path.c_str(),
         std::strerror(e));
  FileInfo f;
  f.path = path;
  f.size = static_cast<int64_t>(st.st_size);
  f.gzip = got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  return f;
}

bool is_pattern(const char *p) { return std::strpbrk(p, "*?[") != nullptr; }

}  // namespace

std::vector<FileInfo> expand_files(const char *const *paths, size_t n) {
  HB_CHECK_ARG(paths || n == 0, "hb_reader: paths is NULL");
  HB_CHECK_ARG(n > 0, "hb_reader: no paths given");
  std::vector<FileInfo> files;
  for (size_t i = 0; i < n; ++i) {
    HB_CHECK_ARG(paths[i] && *paths[i], "hb_reader: path %zu is NULL or empty",
                 i);
    if (!is_pattern(paths[i])) {
      files.push_back(probe(paths[i]));
      continue;
    }
    glob_t g;
    int rc = ::glob(paths[i], GLOB_ERR, nullptr, &g);
    if (rc != 0) {
      if (rc != GLOB_NOMATCH) ::globfree(&g);
      fail(HB_ERR_IO, "hb_reader: pattern '%s' %s", paths[i],
           rc == GLOB_NOMATCH ? "matches no file" : "cannot be read");
    }
    try {
      for (size_t k = 0; k < g.gl_pathc; ++k)
        files.push_back(probe(g.gl_pathv[k]));
    } catch (...) {
      ::globfree(&g);
      throw;
    }
    ::globfree(&g);
  }
  return files;
}

}  // namespace reader
}  // namespace hb
