#include "launcher/root_cause.h"

#include <algorithm>

namespace hb {
namespace launcher {

void DepartureLog::add(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  ranks_.push_back(rank);
}

std::vector<int> DepartureLog::order() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ranks_;
}

void DepartureLog::add_join(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  joined_.push_back(rank);
}

bool DepartureLog::joined(int rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::find(joined_.begin(), joined_.end(), rank) != joined_.end();
}

void DepartureLog::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  ranks_.clear();
  joined_.clear();
}

size_t root_cause(const std::vector<WorkerFailure> &reaped,
                  const std::vector<int> &departures) {
  auto departed_at = [&](int rank) -> size_t {
    if (rank < 0) return departures.size();
    auto it = std::find(departures.begin(), departures.end(), rank);
    return static_cast<size_t>(it - departures.begin());
  };
  // A first-reaped worker the store never saw (it died before joining, or
  // is not a rank) keeps its place: nobody failed because of its leaving.
  const size_t first = departed_at(reaped[0].rank);
  if (first == departures.size()) return 0;
  size_t best = 0, best_at = first;
  for (size_t i = 1; i < reaped.size(); ++i) {
    size_t at = departed_at(reaped[i].rank);
    if (at < best_at) {
      best = i;
      best_at = at;
    }
  }
  return best;
}

}  // namespace launcher
}  // namespace hb
