// One table a ps task owns a shard of: its rows (an ordinary embedding
// Shard: shard ps_index of num_ps, ids owned by id mod num_ps, the table's
// initializer and optimizer), its staleness clock (clock.h), the rounds of
// staleness 0, and what each worker rank committed. The server (server.h)
// decodes the messages and decides when a request may go; this applies it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "embedding/checkpoint.h"
#include "embedding/id_map.h"
#include "embedding/shard.h"
#include "ps/clock.h"
#include "ps/positions.h"
#include "ps/split_queue.h"
#include "ps/wire.h"

namespace hb {
namespace ps {

class OwnedTable {
 public:
  // spec: as the workers pass it (its fingerprint identifies the table);
  // the rows are laid out by id mod num_ps whatever its partition.
  // age: staleness bounds the age of a push's rows (versions), not steps.
  OwnedTable(const emb::Spec &spec, int ps_index, int num_ps, int world,
             int64_t staleness, bool age = false);

  const emb::Spec &spec() const { return spec_; }
  uint64_t fingerprint() const { return fingerprint_; }
  StalenessClock &clock() { return clock_; }
  const StalenessClock &clock() const { return clock_; }

  // Throws HB_ERR_INVALID_ARGUMENT naming the first id that is out of
  // range or not owned by this ps task.
  void check_ids(const std::vector<int64_t> &ids) const;
  // Initial weights (dim floats per id) of a table just created.
  void set_rows(const std::vector<int64_t> &ids, const std::vector<float> &w);

  void attach(int rank);
  // Ranks up to world - 1 exist (workers that joined mid-job: clock.h).
  void grow(int world);
  // A lost rank speaks again (same connection): it resumes at the slowest.
  void revive(int rank);
  // A push dropped as a replay still counts one step of rank's clock: a
  // restarted worker's clocks were revived together (clock.h), and each
  // step it makes from there, replayed or new, counts once in every table
  // (else a table whose push of the step was applied before the kill would
  // fall a step behind the others, and the worker could wait in one table
  // for workers that wait in another for it).
  // A replayed split batch (split_replay) pushed at a new step of rank
  // commits that step with pos: what it carries is applied here already.
  void replayed(int rank, Stats &st,
                std::pair<int64_t, int64_t> step = {-1, -1},
                const std::string *pos = nullptr) {
    if (pos && step > committed_[rank]) {
      committed_[rank] = step;
      position_[rank] = *pos;
    }
    clock_.tick(rank);
    apply_rounds(st);
  }
  bool attached(int rank) const { return attached_[rank] != 0; }
  // rank left the table or was lost: a round that waited only for it
  // completes.
  void left(int rank, Stats &st);
  void lost(int rank, Stats &st);

  // The last push applied from rank ({-1, -1}: none) and its position.
  std::pair<int64_t, int64_t> committed(int rank) const {
    return committed_[rank];
  }
  const std::string &position(int rank) const { return position_[rank]; }
  // A push at or below what rank committed: a replay.
  bool replay(int rank, std::pair<int64_t, int64_t> step) const {
    return step <= committed_[rank];
  }

  // A push of a split batch this table already applied, from any rank
  // (split_queue.h, SplitTag). HB_ERR_INVALID_ARGUMENT when the batch
  // straddles what was applied (its holder must cut its first batch at the
  // lease's replay_end).
  bool split_replay(const SplitTag &t) const;
  // The end of the last batch of (epoch, split) applied here; -1: none.
  int64_t split_applied(int64_t epoch, int64_t split) const {
    auto it = split_done_.find({epoch, split});
    return it == split_done_.end() ? -1 : it->second;
  }

  // The updates applied so far (a push applied, or a round): what a pull
  // returns with its rows, and a push says it computed its gradients on.
  int64_t version() const { return version_; }
  // The rows of ids (checked) in the wire dtype.
  std::string pull(const std::vector<int64_t> &ids, Stats &st);
  // A checked push: committed with pos at once, applied now (staleness >
  // 0) or with its round (0). Not a replay. pulled: the version its rows
  // had (-1: unknown, taken as current). With the age bound, a push whose
  // age (version() - pulled) exceeds k is applied with its gradient scaled
  // by 1 / (1 + age) -- staleness-aware async SGD (Zhang et al. 2016):
  // for SGD exactly the learning rate scaled; adaptive optimizers see the
  // scaled gradient.
  // tag: the split batch it carries (if any), applied with it.
  void push(int rank, std::pair<int64_t, int64_t> step,
            std::vector<int64_t> ids, std::vector<float> grads,
            const std::string &pos, Stats &st, int64_t pulled = -1,
            const SplitTag &tag = SplitTag());

  emb::ShardFile save(const std::string &dir, uint64_t nonce);
  // What every rank committed, beside the shard (job checkpoints).
  emb::ShardFile save_positions(const std::string &dir, uint64_t nonce);
  // A load in two steps: stage (validates, changes nothing), then commit or
  // drop what was staged. old_num_ps > 0: the checkpoint's positions too
  // (written by that many ps tasks under nonce), which replace what the
  // ranks committed here; pushes waiting for a round are dropped (they come
  // after the checkpoint, and are pushed again).
  void stage(const std::string &dir, uint64_t nonce = 0, int old_num_ps = 0);
  void commit_staged(bool commit);
  // Every row's id and weights (dim floats).
  void dump(std::vector<int64_t> *ids, std::string *rows) const;

 private:
  void step_rows(const int64_t *ids, size_t n, const float *g);
  // Staleness 0: applies every complete round.
  void apply_rounds(Stats &st);

  emb::Spec spec_;  // partition MOD over the ps tasks
  uint64_t fingerprint_;
  int ps_index_, num_ps_;
  std::unique_ptr<emb::Shard> shard_, staged_;
  std::unique_ptr<Committed> staged_committed_;
  StalenessClock clock_;
  int64_t round_ = 0;  // staleness 0: the round being collected
  int64_t version_ = 0;
  std::vector<std::vector<int64_t>> pend_ids_;
  std::vector<std::vector<float>> pend_grads_;
  std::vector<char> has_pend_;
  // Per rank: {step, k} of the last push applied (the worker's step and
  // the push's number within it) and the position that came with it.
  std::vector<std::pair<int64_t, int64_t>> committed_;
  std::vector<std::string> position_;
  // Per (epoch, split) pushed here: the end of its last batch applied.
  // Kept for the whole job (a late push of a finished split, from a worker
  // that was stopped, must still be dropped): one map node per split.
  std::map<std::pair<int64_t, int64_t>, int64_t> split_done_;
  std::vector<char> attached_;
  // Scratch of a round.
  emb::Dedup dedup_;
  std::vector<int64_t> ids_;
  std::vector<float> grads_, sum_;
};

}  // namespace ps
}  // namespace hb
