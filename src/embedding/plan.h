// The host-side plan of one collective step, shared by the host table
// (table.cc) and the device table (device_table.cc), so both follow the
// same dedup / partition / order contract (docs/embedding-format.md, "Step
// order"):
//
// - prepare: the ids are deduplicated in first-occurrence order, checked
//   (static tables: [0, num_rows)) and bucketed by owner with a stable
//   counting sort; pos()[u] is the send position of unique id u.
// - agree_counts: one header per peer {status, bad id, count}, so a failure
//   on any rank fails the step on every rank instead of blocking them.
// - owner_dedup: the owner's dedup of what it received, when more than one
//   rank sent ids (received ids are packed by source rank, so the first
//   occurrence of an id comes from the lowest rank).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "common/agreement.h"
#include "embedding/id_map.h"
#include "embedding/shard.h"
#include "embedding/spec.h"

namespace hb {
namespace emb {

class StepPlan {
 public:
  StepPlan(const Spec &spec, int rank, int world);

  // Local half of a step (what: the public call, for messages; data: out or
  // grads, only checked for NULL). Throws HB_ERR_INVALID_ARGUMENT naming a
  // bad id, which agree_counts() then reports to the other ranks.
  void prepare(const int64_t *ids, size_t n, const void *data,
               const char *what);
  // The parts of prepare() a device table uses, which plans on the device
  // (device_plan.h): check_args (first; resets the plan), then reject_id
  // (throws as prepare() does on a bad id) or set_send_counts (world
  // counts). send_ids() and pos() stay empty then.
  void check_args(const int64_t *ids, size_t n, const void *data,
                  const char *what);
  [[noreturn]] void reject_id(int64_t id, const char *what);
  void set_send_counts(const int64_t *counts);
  // Header exchange after prepare (o: this rank's outcome so far); fills
  // recv_counts(). Throws when any rank failed.
  void agree_counts(Exchange &x, Outcome &o, const char *what);
  // Owner side: dedups the nrecv received ids when several ranks sent ids.
  // Returns the number of unique ids (owner() filled) or -1 when the
  // received ids are already unique.
  int64_t owner_dedup(const int64_t *recv_ids, size_t nrecv);
  // The same over the received ids where they arrived: source p's
  // recv_counts()[p] ids at blocks[p] (world pointers; unused where the
  // count is 0).
  int64_t owner_dedup(const int64_t *const *blocks);
  // Whether the last owner_dedup indexed by id (a static table within
  // Dedup's array bound) rather than hashing.
  bool owner_indexed() const { return owner_indexed_; }

  const Dedup &local() const { return dedup_; }
  const Dedup &owner() const { return owner_dedup_; }
  // pos()[u] for u < local().unique().size(). At world 1 it is the
  // identity, kept from call to call (it may be longer than unique()), and
  // send_ids() is local().unique() itself: no fill or copy per call.
  const std::vector<uint32_t> &pos() const { return pos_; }
  const std::vector<int64_t> &send_ids() const {
    return world_ == 1 ? dedup_.unique() : send_ids_;
  }
  const std::vector<int64_t> &send_counts() const { return send_counts_; }
  const std::vector<int64_t> &recv_counts() const { return recv_counts_; }
  int64_t recv_total() const;
  int sources() const;  // ranks that sent this rank ids
  // A collection agrees on the counts of all its tables in one header
  // (collection.cc) and hands each plan its share.
  void set_recv_counts(std::vector<int64_t> counts) {
    recv_counts_ = std::move(counts);
  }
  const std::optional<int64_t> &bad_id() const { return bad_id_; }
  uint64_t remote_sent() const;  // ids this rank sends to other ranks

 private:
  Spec spec_;
  Partitioner part_;
  int rank_, world_;
  std::optional<int64_t> bad_id_;
  template <class Owner>
  void sort_by_owner(Owner owner);  // prepare's bucketing of unique()

  // The owner dedup's index bound: a static table's rows (the senders
  // checked its ids), 0 (hash) for a dynamic one.
  int64_t owner_bound() const { return spec_.dynamic() ? 0 : spec_.num_rows; }
  bool owner_indexed_ = false;
  Dedup dedup_, owner_dedup_;
  std::vector<uint32_t> pos_;
  std::vector<int64_t> send_ids_, send_counts_, recv_counts_, next_;
};

// dst[slot] = sum of the src rows i with inv[i] == u, slot = map ? map[u]
// : u, in increasing i: the first row is copied, later ones are added.
// inv numbers the ids in first-occurrence order (a Dedup's inverse).
// lead: positions [0, lead) hold new ids in order (inv[i] == i, a Dedup's
// leading_new()), copied in one piece when map is NULL.
void sum_rows(const float *src, size_t n, const uint32_t *inv,
              const uint32_t *map, int64_t dim, float *dst, size_t lead = 0);

// Groups positions [0, n) by slot: slot(i) = map ? map[inv[i]] : inv[i],
// in [0, nslots), every slot non-empty. order gets the positions slot by
// slot, ascending inside a slot, and seg (nslots + 1) the slot starts: the
// layout of a segment sum that adds a slot's rows in input order (the
// device counterpart of summing the first row, then += each later one).
void group_by_slot(const uint32_t *inv, size_t n, const uint32_t *map,
                   size_t nslots, std::vector<int64_t> *order,
                   std::vector<int64_t> *seg);

}  // namespace emb
}  // namespace hb
