// The commit of one save, without collectives (it may run on a background
// thread while the training thread runs collectives on the context):
//
//   every rank writes its files (writer.h), then publishes their sizes and
//   checksums -- or its error -- under "<scope>/ckpt/<nonce>/rank-<r>" in
//   the rendezvous store (its client is thread-safe);
//   rank 0 waits for every rank's key, writes the tables' manifests and the
//   job MANIFEST (the commit point), applies the retention and publishes
//   "<scope>/ckpt/<nonce>/commit" = "ok" or the error;
//   the other ranks wait for that key.
//
// A dead peer fails the waits at once (HB_ERR_PEER_FAILED through the
// context's Health); otherwise they are bounded by the handle's timeout.
// In a world of one there is no store: rank 0 commits alone.
#pragma once

#include <atomic>
#include <string>
#include <thread>

#include "hb.h"
#include "recovery/snapshot.h"

namespace hb {
namespace rdv {
class KV;
}
namespace recovery {

struct CommitResult {
  hb_status status = HB_OK;
  std::string message;
  uint64_t file_bytes = 0;
  double write_seconds = 0;
};

// Writes this rank's files and takes part in the commit; never throws.
CommitResult write_and_commit(const Snapshot &s, rdv::KV *kv,
                              const std::string &key_prefix,
                              int64_t timeout_ms);

// A rank that fails before it writes (its snapshot) still takes part: it
// publishes the failure where the others wait for it (rank 0: the verdict;
// the others: their key), so nobody waits for its timeout. Never throws.
void publish_failure(rdv::KV *kv, const std::string &key_prefix, int rank,
                     hb_status status, const std::string &message);

// A save being written: on a background thread (async_write) or already
// done (synchronous saves run write_and_commit on the caller's thread).
class PendingSave {
 public:
  PendingSave(Snapshot s, rdv::KV *kv, std::string key_prefix,
              int64_t timeout_ms, bool background);
  ~PendingSave();  // joins
  PendingSave(const PendingSave &) = delete;
  PendingSave &operator=(const PendingSave &) = delete;

  bool done() const { return done_.load(); }
  // Joins the thread; the result.
  const CommitResult &wait();
  int64_t step() const { return snap_.step; }
  const std::string &path() const { return snap_.ckpt; }

 private:
  Snapshot snap_;
  rdv::KV *kv_;
  std::string prefix_;
  int64_t timeout_ms_;
  CommitResult result_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

}  // namespace recovery
}  // namespace hb
