// Cross-rank agreement over an all-to-all of per-peer payloads (Exchange):
// the collective a sharded table needs, also used by checkpoints and the
// evaluator. The same logic runs over hb_alltoallv on a context
// (comm/context_exchange.h) or over an in-process exchange that simulates k
// ranks with threads (tests).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hb.h"

namespace hb {

class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  // k int64 to every peer: send[p*k, p*k+k) goes to p, recv[p*k, ...)
  // comes from p.
  virtual void alltoall(const int64_t *send, int64_t *recv, size_t k) = 0;
  // Byte payloads packed in rank order; send_bytes[p] on this rank equals
  // recv_bytes[me] on rank p.
  virtual void alltoallv(const void *send, const int64_t *send_bytes,
                         void *recv, const int64_t *recv_bytes) = 0;
  // Asynchronous rounds (comm/progress.h): post() runs job on the
  // exchange's progress thread after every job posted before it; settle()
  // waits, bounded, for them all. The job must not throw (it keeps its own
  // outcome). The default, an exchange without a progress thread, runs the
  // job now on the caller's thread.
  virtual void post(std::function<void()> job) { job(); }
  virtual void settle() {}
  virtual bool async() const { return false; }
  // An alltoallv whose receive sizes travel with the data, in one round
  // (comm/backend.h, alltoallv_sized): deliver(p, data, bytes) runs once
  // per rank p, in rank order, with p's block to this rank (data valid
  // until this exchange's next call). Only where sized_in_one_round(), the
  // same answer on every rank; elsewhere callers exchange sizes first.
  using Deliver = std::function<void(int, const char *, size_t)>;
  virtual bool sized_in_one_round() const { return false; }
  virtual void alltoallv_sized(const void *send, const int64_t *send_bytes,
                               const Deliver &deliver);
  // alltoallv with the blocks written and read in place (comm/backend.h,
  // alltoallv_fill): fill(p, dst) writes the send_bytes[p] > 0 bytes for p
  // at dst, once per such p in rank order before anything is sent;
  // deliver(p, data, bytes) then runs once per rank p, in rank order, with
  // p's recv_bytes[p] (valid until this exchange's next call). On the call
  // board dst and data are the slots themselves; the default stages them
  // through buffers and alltoallv (the same bytes and rounds).
  using Fill = std::function<void(int, char *)>;
  virtual void alltoallv_fill(const int64_t *send_bytes,
                              const int64_t *recv_bytes, const Fill &fill,
                              const Deliver &deliver);

 private:
  // The default alltoallv_fill's staging: kept, so that the delivered
  // blocks stay valid until the next call, as documented (it freed them
  // on return).
  std::vector<char> fill_send_, fill_recv_;
};

// Which collective a rank is making, checked across ranks by the first
// agreement of every table collective: ranks that call different operations,
// on different tables, or that are at different points of a table's call
// sequence all fail that call with HB_ERR_MISMATCH, before any row moves
// (so the tables stay consistent and the next matched call works).
enum CallOp : int64_t {
  kCallNone = 0,  // not checked (later agreements within one call)
  kCallCreate = 1,
  kCallLookup,
  kCallApply,
  kCallSave,
  kCallLoad,
  kCallExport,
  kCallExportVersion,  // serving/export_table.h: versioned or delta export
};
const char *call_op_name(int64_t op);

struct CallSig {
  int64_t op = kCallNone;
  int64_t table = 0;  // the table's spec fingerprint
  int64_t seq = 0;    // the table's matched collective calls so far
  // Advanced by agree() once every rank made the same call.
  int64_t *counter = nullptr;
  // The table's name: exchanged (error path only) when ranks call on
  // different tables, so the message names them instead of fingerprints.
  const std::string *name = nullptr;
};

// What one rank's local preparation of a collective step produced: OK, or
// the status and message of its failure. Every collective step first
// agrees on outcomes so a failure on one rank fails the step on all ranks
// instead of leaving the others blocked.
struct Outcome {
  hb_status status = HB_OK;
  bool has_detail = false;
  int64_t detail = 0;  // e.g. the offending id
  std::string message;
  CallSig sig;     // checked across ranks when sig.op != kCallNone
  void capture();  // call inside a catch block
};

// Exchanges one header per peer {status, has_detail, detail, value, sig}:
// value_to[p] goes to p; returns the values received from every peer. Throws
// HB_ERR_MISMATCH on every rank when the ranks' call signatures differ
// (naming each rank's call); otherwise, when any rank failed, this rank's own
// error, or `what` naming the first failing rank and `detail_name` = detail.
std::vector<int64_t> agree(Exchange &x, const Outcome &mine,
                           const std::vector<int64_t> &value_to,
                           const char *what, const char *detail_name);

// Every rank's bytes, in rank order (an alltoall of the sizes, then an
// alltoallv): for the config descriptions of common/mismatch.h.
std::vector<std::string> gather_strings(Exchange &x, const std::string &mine);

// Barrier-like agreement with no payload.
inline void agree(Exchange &x, const Outcome &mine, const char *what) {
  agree(x, mine, std::vector<int64_t>(x.world(), 0), what, nullptr);
}

}  // namespace hb
