// A table whose rows live on the ps tasks, as a worker sees it. It is an
// ordinary emb::Table over a world of one (this worker): the local half of
// every step -- dedup, range checks, partial sums in batch order, pooling
// in collections -- is the table's own, and only the owner halves go to
// the ps tasks: encode_rows pulls the rows of the unique ids, and
// apply_received pushes their partial sums (wire dtype) with this worker's
// step and reader position. Id `id` lives on ps task id mod num_ps.
//
// Not collective: workers call lookup and apply_gradients independently
// (the ps tasks' staleness clock orders them); save, load and export are
// made by one worker (the chief) for all.
#pragma once

#include <functional>
#include <vector>

#include "embedding/table.h"
#include "ps/client.h"

namespace hb {
namespace ps {

class PsTable : public emb::Table {
 public:
  // Attaches the table on every ps task (creating it there the first
  // time). init: initial weights of ids (dense buffers), used only by the
  // ps tasks that create the table.
  PsTable(Client &client, const emb::Spec &spec,
          const std::function<void()> &local_check,
          const std::vector<int64_t> *init_ids = nullptr,
          const float *init_rows = nullptr);
  ~PsTable() override;

  void encode_rows(const int64_t *recv, size_t nrecv, int64_t nu,
                   const emb::Dedup &owner, unsigned char *dst) override;
  void apply_received(const int64_t *recv, size_t nrecv, int64_t nu,
                      const emb::Dedup &owner,
                      const unsigned char *partials) override;

  void save(const char *dir);
  void load(const char *dir);
  void export_to(const char *path);

  // The steps this worker has committed on each ps task (from attach).
  const std::vector<int64_t> &attached_steps() const { return attached_; }
  int64_t remote_id(int ps) const { return remote_[ps]; }
  void resume_at(int64_t step) { step_ = step; }
  int64_t step() const { return step_; }

 private:
  // ids split by owner: per ps, the ids and their positions.
  void bucket(const int64_t *ids, size_t n);

  Client &c_;
  emb::Spec ps_spec_;            // partition MOD over the ps tasks
  std::vector<int64_t> remote_;  // the table's id on each ps task
  std::vector<int64_t> attached_;
  int64_t step_ = 0;  // the next push's step
  std::vector<std::vector<int64_t>> ids_;
  std::vector<std::vector<size_t>> at_;
};

}  // namespace ps
}  // namespace hb
