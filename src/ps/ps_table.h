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
#include <memory>
#include <utility>
#include <vector>

#include "embedding/checkpoint.h"
#include "embedding/table.h"
#include "ps/client.h"

namespace hb {
namespace ps {

class PsTable : public emb::Table {
 public:
  // Attaches the table on every ps task (creating it there the first
  // time). init: initial weights of ids (dense buffers), used only by the
  // ps tasks that create the table.
  PsTable(std::shared_ptr<Client> client, const emb::Spec &spec,
          const std::function<void()> &local_check,
          const std::vector<int64_t> *init_ids = nullptr,
          const float *init_rows = nullptr);
  ~PsTable() override;

  void encode_rows(const int64_t *recv, size_t nrecv, int64_t nu,
                   const emb::Dedup &owner, unsigned char *dst) override;
  void apply_received(const int64_t *recv, size_t nrecv, int64_t nu,
                      const emb::Dedup &owner,
                      const unsigned char *partials) override;
  // The rows are float32 (a world-1 collection's own): the wire's bytes.
  void apply_rows(const int64_t *recv, size_t nrecv, int64_t nu,
                  const emb::Dedup &owner, const float *partials) override {
    apply_received(recv, nrecv, nu, owner,
                   reinterpret_cast<const unsigned char *>(partials));
  }
  // Tables of one client batch their pulls and pushes (one message per ps
  // task for all of them).
  std::unique_ptr<emb::OwnerBatch> batch_with(
      const std::vector<emb::Table *> &all) override;
  // The owner halves of calls whose tables are PsTables of one client.
  static void pull_rows(const std::vector<emb::OwnerCall> &calls);
  static void push_partials(const std::vector<emb::OwnerCall> &calls);

  void save(const char *dir);
  void load(const char *dir);
  void export_to(const char *path);

  // Job checkpoints (src/recovery), made by one worker while the others
  // wait at the step boundary: every ps task writes its shard and what each
  // rank committed (positions.h) into dir; the files, for the manifests.
  struct JobFiles {
    std::vector<emb::ShardFile> shards, positions;  // one per ps task
  };
  JobFiles save_job(const std::string &dir, uint64_t nonce);
  // All or nothing, as load; old_num_ps: how many ps tasks wrote it (0: a
  // checkpoint without positions, e.g. of a worker-sharded table).
  void load_job(const std::string &dir, uint64_t nonce, int old_num_ps);

  int64_t remote_id(int ps) const { return remote_[ps]; }
  Client &client() { return c_; }
  // The table as the ps tasks hold it (partition MOD over them): the spec
  // of its checkpoint manifests.
  const emb::Spec &ps_spec() const { return ps_spec_; }
  // The worker's step went back (Client::committed): the pushes that
  // follow are replays until they pass what the ps tasks have.
  void rewind() { last_ = {-1, -1}, k_step_ = -1; }
  // The ps tasks hold `last` for this worker (a restored job checkpoint,
  // Client::resync): its next pushes follow it.
  void resume_after(std::pair<int64_t, int64_t> last) {
    last_ = last, k_step_ = -1;
  }

 private:
  // ids split by owner: per ps, the ids and their positions. nu: the
  // owner dedup's result, which a world of one never has (-1).
  void bucket(const int64_t *ids, size_t n, int64_t nu);
  JobFiles save_shards(const std::string &dir, uint64_t nonce, bool positions);
  // extra: kLoad's ints after the table id.
  void load_from(const std::string &dir, std::vector<int64_t> extra);

  std::shared_ptr<Client> client_;  // the context's (kept alive)
  Client &c_;
  emb::Spec ps_spec_;  // partition MOD over the ps tasks
  // {step, k} of the next push: the worker's step and the number of this
  // table's pushes in it so far (the ps tasks drop a push at or below the
  // last they applied: a replay).
  std::pair<int64_t, int64_t> next_push();

  std::vector<int64_t> remote_;  // the table's id on each ps task
  std::vector<int64_t> pulled_;  // per ps task: the version the last pull saw
  std::pair<int64_t, int64_t> last_{-1, -1};  // the newest the ps tasks have
  int64_t k_step_ = -1, k_ = 0;
  std::vector<std::vector<int64_t>> ids_;
  std::vector<std::vector<size_t>> at_;
};

}  // namespace ps
}  // namespace hb
