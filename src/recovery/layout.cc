#include "recovery/layout.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "abi/error.h"
#include "common/file_io.h"
#include "common/log.h"

namespace hb {
namespace recovery {

std::string join_path(const std::string &dir, const std::string &name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string checkpoint_dir_name(int64_t step, uint64_t nonce) {
  char b[64];
  std::snprintf(b, sizeof b, "ckpt-%012" PRId64 "-%08" PRIx64, step,
                static_cast<uint64_t>(nonce & 0xffffffffu));
  return b;
}

bool parse_checkpoint_dir_name(const std::string &name, int64_t *step) {
  if (name.compare(0, 5, "ckpt-") != 0) return false;
  size_t dash = name.find('-', 5);
  if (dash == std::string::npos || dash == 5 || dash + 9 != name.size())
    return false;
  int64_t v = 0;
  for (size_t i = 5; i < dash; ++i) {
    if (name[i] < '0' || name[i] > '9' || v > INT64_MAX / 10 - 9) return false;
    v = v * 10 + (name[i] - '0');
  }
  for (size_t i = dash + 1; i < name.size(); ++i)
    if (!std::isxdigit(static_cast<unsigned char>(name[i]))) return false;
  *step = v;
  return true;
}

std::vector<std::string> list_checkpoint_dirs(const std::string &root) {
  std::vector<std::string> out;
  DIR *d = ::opendir(root.c_str());
  if (!d) return out;
  while (struct dirent *e = ::readdir(d)) {
    int64_t step;
    if (parse_checkpoint_dir_name(e->d_name, &step))
      out.push_back(join_path(root, e->d_name));
  }
  ::closedir(d);
  return out;
}

std::string table_dir(const std::string &ckpt) {
  return join_path(ckpt, "tables");
}

std::string replicated_buffer_file(const std::string &name) {
  return "buffers/" + name;
}

std::string rank_file(const std::string &folder, const std::string &name,
                      int rank) {
  return folder + "/" + name + ".rank-" + std::to_string(rank);
}

void check_name(const char *what, const char *name) {
  HB_CHECK_ARG(name && name[0], "%s: name is NULL or empty", what);
  size_t n = std::strlen(name);
  bool ok =
      n <= 64 && std::strcmp(name, ".") != 0 && std::strcmp(name, "..") != 0;
  for (size_t i = 0; ok && i < n; ++i) {
    char c = name[i];
    ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' ||
         c == '-';
  }
  HB_CHECK_ARG(ok,
               "%s: name '%s' must be 1-64 characters of [A-Za-z0-9._-] (it "
               "names files)",
               what, name);
}

bool read_job_file(const std::string &root, std::string *job) {
  std::string path = join_path(root, "JOB");
  if (!file_exists(path)) return false;
  std::string text = read_whole_file(path);
  if (text.empty() || text.back() != '\n')
    fail(HB_ERR_CORRUPT, "job checkpoint: '%s' is truncated", path.c_str());
  *job = text.substr(0, text.size() - 1);
  return true;
}

void write_job_file(const std::string &root, const std::string &job) {
  AtomicFile f(join_path(root, "JOB"));
  std::string text = job + "\n";
  f.write(text.data(), text.size());
  f.commit();
}

bool read_finished_file(const std::string &root, int64_t *step) {
  std::string path = join_path(root, "FINISHED");
  if (!file_exists(path)) return false;
  std::string text = read_whole_file(path);
  long long s = -1;
  if (std::sscanf(text.c_str(), "step %lld\n", &s) != 1 || text.back() != '\n')
    fail(HB_ERR_CORRUPT, "job checkpoint: '%s' is malformed", path.c_str());
  *step = s;
  return true;
}

void write_finished_file(const std::string &root, int64_t step) {
  AtomicFile f(join_path(root, "FINISHED"));
  std::string text = format("step %lld\n", static_cast<long long>(step));
  f.write(text.data(), text.size());
  f.commit();
}

void remove_finished_file(const std::string &root) {
  std::string path = join_path(root, "FINISHED");
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    fail(HB_ERR_IO, "job checkpoint: cannot remove '%s': %s", path.c_str(),
         std::strerror(errno));
}

void remove_tree(const std::string &path) {
  DIR *d = ::opendir(path.c_str());
  if (d) {
    while (struct dirent *e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      std::string p = join_path(path, name);
      struct stat st;
      if (::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        remove_tree(p);
      else if (::unlink(p.c_str()) != 0)
        HB_LOG_WARN("job checkpoint: cannot remove '%s': %s", p.c_str(),
                    std::strerror(errno));
    }
    ::closedir(d);
  }
  if (::rmdir(path.c_str()) != 0 && errno != ENOENT)
    HB_LOG_WARN("job checkpoint: cannot remove '%s': %s", path.c_str(),
                std::strerror(errno));
}

}  // namespace recovery
}  // namespace hb
