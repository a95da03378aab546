// The work queue of dynamic splits (docs/parameter-servers.md, "Dynamic
// splits"; issue 33, first layer): the job's input, samples [0, samples),
// is cut into splits of split_size samples; a worker asks for the next
// split when it has finished its last, so a fast worker takes more.
//
// Owned by the ps tier (ps task 0), not the chief: the ps tasks are the
// part of a ps job that outlives any worker (the chief included: a lost
// chief is restarted like any worker), and they already hold each worker's
// committed position, from which a lost worker's split is handed out again.
//
// Exactly once: a worker's progress inside its split is the offset it
// committed with its pushes (commit). A worker that is lost gives its
// split back (lost): the next worker that asks resumes it from the
// committed offset; a restarted worker gets its own split back first.
// Splits of an epoch come in an order drawn from (seed, epoch): the same
// seed hands the same splits in the same order when nothing fails. A
// finished split is never handed out again.
//
// Not thread-safe (the ps serves from one thread).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace hb {
namespace ps {

struct SplitLease {
  // -1: nothing left (every epoch handed out and finished); kWait: nothing
  // to hand out now, but another worker holds a split that may come back
  // (it is lost and not given back yet): ask again.
  int64_t split = -1;
  int64_t epoch = 0;
  int64_t begin = 0, end = 0;  // samples [begin, end)
  int64_t from = 0;            // resume here (begin, or a committed offset)
  // > from: some ps tables already applied [from, replay_end) (its last
  // holder was lost between its pushes of a batch, or before it committed
  // the batch to the queue): the first batch must be exactly that, so
  // every table either drops it or applies it whole (Client::split_next).
  int64_t replay_end = 0;
  static constexpr int64_t kWait = -2;
};

// The batch of a split that a push carries (Client::split_batch), so that
// each ps table knows which samples of which split it applied, whoever
// pushed them: a batch it already has is dropped (exactly once when a
// lost worker's split is resumed by another, or its pushes arrive late).
struct SplitTag {
  int64_t epoch = -1, split = -1, begin = 0, end = 0;
  bool valid() const { return split >= 0; }
};

// How far a queue got (what an evaluator reports of a job checkpoint's).
struct SplitProgress {
  int64_t epoch = 0;  // the epoch being handed out; epochs once all were
  int64_t epochs = 0, splits_per_epoch = 0, splits_done = 0;
  // Samples (or bytes) of every epoch: trained -- finished splits, and open
  // ones up to their committed offsets -- and in all.
  int64_t samples_done = 0, samples_total = 0;
  // Handed out and unfinished (held, or given back): from is the offset.
  std::vector<SplitLease> open;
};

class SplitQueue {
 public:
  // HB_ERR_INVALID_ARGUMENT naming the bad value (samples, split_size,
  // epochs < 1, world < 1).
  SplitQueue(int64_t samples, int64_t split_size, int64_t epochs, uint64_t seed,
             int world);

  int64_t num_splits() const { return per_epoch_; }
  // rank's split: its own unfinished one, else one given back, else the
  // next of the current epoch's order (then the next epoch's); kWait when
  // none is left but another rank holds an unfinished one.
  SplitLease next(int rank);
  // rank reached `offset` in its split (a push committed it); offsets only
  // move forward. HB_ERR_INVALID_ARGUMENT when rank holds no such split or
  // offset lies outside it.
  void commit(int rank, int64_t split, int64_t offset);
  // rank finished its split (offset = end): it is never handed out again.
  void done(int rank, int64_t split);
  // rank is lost for good (or left): its unfinished split goes back to
  // the queue at its committed offset, for whoever asks next. Returns what
  // went back (split -1: nothing).
  SplitLease give_back(int rank);

  // Ranks up to world - 1 may ask (workers that joined mid-job).
  void grow(int world) {
    if (world > static_cast<int>(held_.size())) held_.resize(world);
  }

  int64_t splits_done() const { return done_count_; }
  // Every split of every epoch finished.
  bool finished() const { return done_count_ == per_epoch_ * epochs_; }

  SplitProgress progress() const;

  // The whole state (checkpoints save the queue; load resumes it: leases
  // become given-back splits at their committed offsets).
  std::string save() const;
  static SplitQueue load(const std::string &bytes, int world);
  // The queue's file in a job checkpoint's tables directory.
  static std::string file_name(uint64_t nonce);

 private:
  struct Held {
    int64_t split = -1, epoch = 0, offset = 0;
  };
  SplitLease lease(const Held &h) const;
  void refill();  // the next epoch's order, when the current one is out

  int64_t samples_, split_size_, epochs_, per_epoch_;
  uint64_t seed_;
  int64_t epoch_ = 0;           // the epoch whose order is being handed out
  std::vector<int64_t> order_;  // its splits, in the seeded order
  size_t next_ = 0;             // the next index into order_
  std::deque<Held> returned_;   // given back, with their committed offsets
  std::vector<Held> held_;      // per rank
  int64_t done_count_ = 0;
};

}  // namespace ps
}  // namespace hb
