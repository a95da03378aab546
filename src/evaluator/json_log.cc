#include "evaluator/json_log.h"

#include <cmath>
#include <cstdio>

#include "abi/error.h"
#include "common/file_io.h"

namespace hb {
namespace evaluator {

std::string json_line(int64_t step, double time,
                      const std::vector<std::pair<std::string, double>> &v) {
  // Names are [A-Za-z0-9._-] (checked when added): no escaping needed.
  std::string s = format("{\"step\":%lld,\"time\":%.6f",
                         static_cast<long long>(step), time);
  for (const auto &kv : v)
    s += std::isfinite(kv.second)
             ? format(",\"%s\":%.17g", kv.first.c_str(), kv.second)
             : format(",\"%s\":null", kv.first.c_str());
  return s + "}";
}

JsonLog::JsonLog(std::string path) : path_(std::move(path)) {
  if (file_exists(path_)) {
    text_ = read_whole_file(path_);
    // A line cut short by something else than hb: dropped.
    size_t nl = text_.rfind('\n');
    text_.resize(nl == std::string::npos ? 0 : nl + 1);
  }
}

int64_t JsonLog::last_step() const {
  if (text_.empty()) return -1;
  size_t start = text_.rfind('\n', text_.size() - 2);
  start = start == std::string::npos ? 0 : start + 1;
  long long step = -1;
  if (std::sscanf(text_.c_str() + start, "{\"step\":%lld", &step) != 1)
    fail(HB_ERR_CORRUPT,
         "hb_evaluator: the last line of '%s' does not start with "
         "{\"step\":N (not an evaluator log?)",
         path_.c_str());
  return step;
}

void JsonLog::append(int64_t step, double time,
                     const std::vector<std::pair<std::string, double>> &v) {
  std::string text = text_ + json_line(step, time, v) + "\n";
  AtomicFile f(path_);
  f.write(text.data(), text.size());
  f.commit();
  text_ = std::move(text);
}

}  // namespace evaluator
}  // namespace hb
