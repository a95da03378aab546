// Temporary directories for checkpoint tests, removed when the test
// program ends.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace hbtest {

inline std::vector<std::string> &temp_dirs() {
  static std::vector<std::string> dirs;
  return dirs;
}

class RemoveTempDirs : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const std::string &d : temp_dirs()) std::filesystem::remove_all(d);
  }
};

inline ::testing::Environment *const g_remove_temp_dirs =
    ::testing::AddGlobalTestEnvironment(new RemoveTempDirs);

// /tmp/<prefix>_<tag>_XXXXXX, created now.
inline std::string temp_dir(const char *prefix, const char *tag) {
  char tmpl[256];
  std::snprintf(tmpl, sizeof tmpl, "/tmp/%s_%s_XXXXXX", prefix, tag);
  char *d = mkdtemp(tmpl);
  if (!d) std::abort();
  temp_dirs().push_back(d);
  return d;
}

}  // namespace hbtest
