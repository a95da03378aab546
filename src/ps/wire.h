// The messages between workers and ps tasks (docs/parameter-servers.md).
// They ride in rendezvous frames (rendezvous/frame.h: length-prefixed,
// capped, strictly decoded): small fields in `ints`, ids, rows, gradients
// and names in `strs`. Every request gets one reply (kReply: ints[0] the
// status, strs[0] the message on error), except kPing, which the ps
// answers with a kPong that carries nothing.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "abi/error.h"
#include "embedding/spec.h"
#include "rendezvous/frame.h"

namespace hb {
namespace ps {

using rdv::Frame;

enum MsgType : uint8_t {
  // worker -> ps
  kHello = 1,    // ints {rank, world, ps index}        -> {}
  kPing = 2,     // heartbeat, answered by kPong
  kAttach = 10,  // strs {spec, init ids, init rows}
                 //                  -> ints {table, committed step, k}
  kDetach = 11,  // ints {table}
  kPull = 12,    // ints {table...}, strs {ids...}
                 //                  -> ints {version...}, strs {rows...}
  kPush = 13,    // ints {table, step, k, version...}, strs {ids, grads...,
                 //                       position[, split tag]}
                 //                                     -> ints {duplicates}
  kSave = 20,    // ints {table, nonce[, positions?]}, strs {dir}
                 //     -> ints {bytes, rows, checksum[, pos bytes, pos sum]}
  kLoad = 21,    // ints {table[, nonce, old num_ps]}, strs {dir}: stage a
                 // checkpoint's rows (and the positions it holds)
  kLoadCommit = 22,    // ints {table, commit?}: swap the staged rows in / drop
  kDump = 23,          // ints {table} -> strs {ids, records}
  kPosition = 30,      // -> ints {table, step, k}..., strs {position}...
  kStats = 31,         // -> ints (Stats fields)
  kSplitNext = 34,     // (ps task 0) -> ints {split, epoch, begin, end, from}
  kSplitCommit = 35,   // (ps task 0) ints {split, offset, done?}
  kSplitApplied = 36,  // ints {epoch, split} -> ints {end applied}... per
                       // table that has a batch of it
  kIdle = 37,       // waiting for a split: hold nobody back until the next pull
                    // or push
  kSplitSave = 38,  // (ps task 0) ints {nonce}, strs {dir}
                    //     -> ints {bytes, checksum}, or {} with no queue
  kSplitLoad = 39,  // (ps task 0) ints {nonce}, strs {dir}
  kBye = 40,
  // ps -> worker
  kPong = 3,
  kReply = 100,
};

// A push's ints per table: {table, step, k, the version its pull returned}.
constexpr size_t kPushInts = 4;

// Counters one ps keeps (hb_ps_stats sums them over the ps tasks, max for
// max_staleness).
struct Stats {
  int64_t pulls = 0, pushes = 0;  // requests (one per table)
  int64_t rows_pulled = 0, rows_pushed = 0;
  int64_t rounds = 0;            // staleness 0: optimizer rounds
  int64_t max_staleness = 0;     // largest (push clock - slowest clock)
  int64_t bound_violations = 0;  // pushes past the bound (must stay 0)
  int64_t duplicate_pushes = 0;  // replays of committed steps, dropped
  int64_t workers_lost = 0, workers_rejoined = 0;
  int64_t busy_us = 0;       // time spent serving requests
  int64_t workers_left = 0;  // ranks that said BYE (now)
  int64_t cpu_us = 0;        // the ps process's CPU time (user + system)
  int64_t workers_gone = 0;  // ranks that left or are lost (now)
  static constexpr size_t kFields = 14;
  void to_ints(std::vector<int64_t> *out) const {
    out->insert(out->end(), {pulls, pushes, rows_pulled, rows_pushed, rounds,
                             max_staleness, bound_violations, duplicate_pushes,
                             workers_lost, workers_rejoined, busy_us,
                             workers_left, cpu_us, workers_gone});
  }
};

// A POD array as bytes, and back (the count must divide exactly).
template <class T>
std::string pack(const T *data, size_t n) {
  return n ? std::string(reinterpret_cast<const char *>(data), n * sizeof(T))
           : std::string();
}
template <class T>
std::vector<T> unpack(const std::string &s, const char *what) {
  if (s.size() % sizeof(T))
    fail(HB_ERR_CORRUPT, "ps message: %s has %zu bytes, not a multiple of %zu",
         what, s.size(), sizeof(T));
  std::vector<T> v(s.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), s.data(), s.size());
  return v;
}

// A table's spec on the wire (the fields that define its rows).
std::string encode_spec(const emb::Spec &s);
// Throws HB_ERR_CORRUPT on a malformed spec.
emb::Spec decode_spec(const std::string &bytes);

Frame request(MsgType type, std::vector<int64_t> ints = {},
              std::vector<std::string> strs = {});
// Replies: OK with a payload, or an error status and message.
Frame ok_reply(uint64_t id, std::vector<int64_t> ints = {},
               std::vector<std::string> strs = {});
Frame error_reply(uint64_t id, hb_status st, const std::string &message);

}  // namespace ps
}  // namespace hb
