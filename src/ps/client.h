// The worker side of parameter-server mode: one connection per ps task,
// a heartbeat thread that pings them all, the reader position that rides
// with every push, and the tables placed on the ps tasks (ps_table.h).
#pragma once

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/health.h"
#include "ps/conn.h"
#include "ps/split_position.h"
#include "ps/split_queue.h"
#include "ps/wire.h"

struct hb_context;

namespace hb {
namespace ps {

class PsTable;

class Client {
 public:
  // Connects to every ps task of ctx (cluster.ps_hosts).
  explicit Client(hb_context &ctx);
  // Says BYE to every ps task (a worker that leaves is not lost).
  ~Client();

  int num_ps() const { return static_cast<int>(conns_.size()); }
  int rank() const { return rank_; }
  Conn &conn(int i) { return *conns_[i]; }
  int owner(int64_t id) const {
    return static_cast<int>(static_cast<uint64_t>(id) %
                            static_cast<uint64_t>(conns_.size()));
  }

  // A step boundary: the pushes that follow belong to the next step and
  // carry p. A worker's step counts these calls (from where it resumed).
  void set_position(std::string p) {
    position_ = std::move(p);
    ++step_;
  }
  const std::string &position() const { return position_; }
  int64_t step() const { return step_; }
  // A table found this worker's pushes up to `step` on a ps task (it
  // restarted without resuming): later pushes count from there.
  void raise_step(int64_t step) { step_ = std::max(step_, step); }
  // Where this worker resumes: the smallest step any of its tables has
  // committed on any ps task, and the position pushed with it ("" when
  // none). The worker's step goes back there, so pushes of steps a ps task
  // already has are dropped there (every sample applied exactly once).
  std::string committed(int64_t *step);
  // After a job checkpoint was restored into the ps tasks (by any worker):
  // each table goes on after what the ps tasks now hold for this rank, and
  // the worker's step is the newest of them.
  void resync();
  // Every ps task's counters: sums, max_staleness the largest.
  Stats stats();
  // Dynamic splits (ps task 0's queue, split_queue.h): this worker's next
  // split (split -1: none left), and its progress in it -- send after the
  // step's pushes were all answered, so the offset is one every table on
  // every ps task has. split_next waits (up to timeout_ms) while the queue
  // says kWait, and asks every ps task how far its tables applied the
  // split: the lease's replay_end says where the first batch must end.
  // wait false: returns a kWait lease at once (the worker counted out, as
  // while it waits) -- for a loop that must reach a collective checkpoint.
  SplitLease split_next(bool wait = true);
  void split_commit(int64_t split, int64_t offset, bool done);
  // The public loop (hb_ps_split_next / hb_ps_split_commit): take flushes
  // the last step's offset to the queue, then leases the next split, from
  // where this worker's applied pushes left it after a restart (read from
  // the ps tasks at the first take); step sets the position riding with
  // the next step's pushes, and flushes the step before.
  // wait false (hb_ps_split_try): a kWait lease at once, holding nothing.
  SplitLease split_take(bool wait = true);
  // Tells the queue the offset of the last step (its pushes were answered):
  // a job checkpoint calls it on every worker before ps task 0 saves the
  // queue, so the queue's offsets there agree with the tables'.
  void split_flush();
  void split_step(int64_t split, int64_t offset);
  // The pushes that follow carry samples [begin, end) of split l, so each
  // ps table drops a batch it already applied (whoever pushed it). Cleared
  // by split_next.
  void split_batch(const SplitLease &l, int64_t begin, int64_t end);
  // The queue into a job checkpoint's tables directory (false: this job
  // has no queue), and back out of one.
  bool split_save(const std::string &dir, uint64_t nonce, uint64_t *bytes,
                  uint64_t *checksum);
  void split_load(const std::string &dir, uint64_t nonce);
  // The tag that rides with a push ("" when none).
  const std::string &split_tag() const { return split_tag_; }

  void add_table(PsTable *t);
  void remove_table(PsTable *t);

 private:
  void heartbeats(int64_t interval_ms);

  int rank_ = 0;
  // The connections' own: a client (kept by its tables) may outlive its
  // context. A dead ps fails it, and with it every later call.
  Health health_;
  std::vector<std::unique_ptr<Conn>> conns_;
  std::string position_;
  std::string split_tag_;
  bool idle_ = false;  // said kIdle since its last split
  int64_t timeout_ms_ = 0;
  int64_t step_ = 0;
  std::vector<PsTable *> tables_;
  // Dynamic splits: the split held (split -1: none), the offset its last
  // step consumes up to, whether the queue has not been told yet, and the
  // position committed before a restart (read once).
  SplitLease held_;
  int64_t held_offset_ = 0;
  bool pending_ = false, resumed_ = false;
  SplitPosition resume_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread heartbeat_;
};

// The context's client, created on first use. Throws HB_ERR_INVALID_ARGUMENT
// when ctx has no ps tasks (collective mode) or is a ps task itself. Tables
// share it, so one destroyed after its context still has it.
std::shared_ptr<Client> client_of(hb_context &ctx, const char *what);

}  // namespace ps
}  // namespace hb
