// The evaluator's log: one JSON object per line, one line per checkpoint.
// Each append rewrites the file under a temporary name and renames it over
// the old one, so a reader (tail -F, a dashboard) sees whole lines only,
// and a crash leaves the previous log.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace hb {
namespace evaluator {

class JsonLog {
 public:
  // Reads what the file holds already (a restarted evaluator appends).
  explicit JsonLog(std::string path);
  // {"step":step,"time":time,"<name>":value,...}; non-finite values: null.
  void append(int64_t step, double time,
              const std::vector<std::pair<std::string, double>> &values);
  const std::string &path() const { return path_; }
  // The step of the last line; -1 when there is none. A restarted
  // evaluator goes on after it, so no checkpoint is logged twice.
  int64_t last_step() const;

 private:
  std::string path_, text_;
};

// The line append() writes (without its newline).
std::string json_line(int64_t step, double time,
                      const std::vector<std::pair<std::string, double>> &v);

}  // namespace evaluator
}  // namespace hb
