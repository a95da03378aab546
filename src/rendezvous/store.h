// The rendezvous store's state machine, free of sockets and threads so it
// can be tested alone: the key-value map, requests parked until their keys
// exist or their deadline passes, and barrier rounds. Each call appends the
// replies it produces (to the caller or to waiters it woke) to `out`; the
// server sends them. Connections are named by a serial number.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "rendezvous/frame.h"

namespace hb {
namespace rdv {

struct Outgoing {
  uint64_t conn;
  Frame frame;
};

// Strict decimal int64 (the whole string); false if it is not one.
bool parse_int64(const std::string &s, int64_t *v);

// The new value of an add on `value` (nullptr: a missing key, i.e. 0).
// HB_ERR_INVALID_ARGUMENT naming the key if the value is not an integer or
// the sum overflows.
int64_t add_to_value(const std::string &key, const std::string *value,
                     int64_t delta);

class Store {
 public:
  explicit Store(int world_size) : world_size_(world_size) {}

  void set(const std::string &key, std::string value,
           std::vector<Outgoing> *out);
  // Replies with the value at once, or parks until the key is set.
  void get(uint64_t conn, uint64_t id, const std::string &key,
           int64_t timeout_ms, int64_t now_ms, std::vector<Outgoing> *out);
  void add(uint64_t conn, uint64_t id, const std::string &key, int64_t delta,
           std::vector<Outgoing> *out);
  void wait(uint64_t conn, uint64_t id, std::vector<std::string> keys,
            int64_t timeout_ms, int64_t now_ms, std::vector<Outgoing> *out);
  // Rank `rank` arrives at the open round of barrier `name`; the round
  // completes when all world_size ranks are there. A rank that times out
  // leaves the round, so a retry joins the same generation.
  void barrier(uint64_t conn, uint64_t id, int rank, const std::string &name,
               int64_t timeout_ms, int64_t now_ms, std::vector<Outgoing> *out);

  // Answers every parked request whose deadline is <= now_ms with a timeout
  // naming what was missing.
  void expire(int64_t now_ms, std::vector<Outgoing> *out);
  // Forgets the parked requests of a closed connection.
  void drop(uint64_t conn);
  // Earliest deadline of a parked request; INT64_MAX if none.
  int64_t next_deadline() const;

  size_t num_keys() const { return kv_.size(); }
  size_t num_parked() const;

 private:
  struct Parked {
    uint64_t conn;
    uint64_t id;
    std::vector<std::string> keys;
    bool want_value;  // get (reply with the value) vs wait
    int64_t deadline;
    int64_t timeout_ms;
  };
  struct Arrival {
    uint64_t conn;
    uint64_t id;
    int64_t deadline;
    int64_t timeout_ms;
  };
  struct Round {
    uint64_t generation = 0;
    std::map<int, Arrival> arrived;
    std::set<int> gave_up;  // arrived, then timed out: not to blame
  };

  void park(Parked p, int64_t now_ms, std::vector<Outgoing> *out);
  bool all_present(const std::vector<std::string> &keys) const;
  Frame answer(const Parked &p) const;
  std::string missing_keys(const std::vector<std::string> &keys) const;
  std::string missing_ranks(const Round &round) const;

  int world_size_;
  std::map<std::string, std::string> kv_;
  std::list<Parked> parked_;
  std::map<std::string, Round> rounds_;        // open barrier rounds by name
  std::map<std::string, uint64_t> completed_;  // rounds done, by name
};

}  // namespace rdv
}  // namespace hb
