// A read-only serving table that follows training: it opens a full export
// and then applies deltas, or opens a newer full export, while lookups go
// on from other threads.
//
// Left-right: two replicas of the table at the same version; lookups read
// the published one, pinned for the call (pins.h). An update builds the
// next version in the other replica, publishes it with one atomic pointer
// store, waits until no lookup still reads the old one, and brings that
// one up to date too. Every lookup therefore reads exactly one version,
// a delta costs O(changed rows) twice, and memory is two replicas.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "serving/replica.h"

namespace hb {
namespace serving {

class ServingTable {
 public:
  explicit ServingTable(const char *path);
  ~ServingTable();

  int64_t dim() const { return dim_; }
  const std::string &name() const { return name_; }
  int64_t rows() const;
  int64_t version() const;
  uint64_t misses() const { return misses_.load(std::memory_order_relaxed); }

  // Thread-safe. Unknown ids read zeros and count as misses. Returns the
  // version every row of this call came from.
  int64_t lookup(const int64_t *ids, size_t n, float *out) const;

  // Applies the delta or opens the full export at path. A delta must start
  // at the served version and come from the same table (lineage); a full
  // export must be newer. Anything else, or a damaged file, throws and
  // leaves the served version as it was. Updates are serialized.
  void update(const char *path);

  // Calls f(id, row) for every row of the served version (tests; not
  // concurrent with update).
  template <class F>
  void for_each(F &&f) const {
    live_.load(std::memory_order_acquire)->for_each(f);
  }

 private:
  // Publishes next, waits until no lookup reads the old replica, and
  // returns it.
  Replica *publish(Replica *next);

  std::string name_;
  int64_t dim_ = 0;
  std::mutex update_mu_;
  std::atomic<Replica *> live_{nullptr};
  std::unique_ptr<Replica> a_, b_;  // live_ is one of them, spare the other
  Replica *spare_ = nullptr;
  mutable std::atomic<uint64_t> misses_{0};
};

}  // namespace serving
}  // namespace hb
