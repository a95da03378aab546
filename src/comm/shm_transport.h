// Same-host shared memory between the ranks of a backend.
//
// Every rank creates one POSIX shared-memory segment holding its incoming
// rings (one per sending peer and channel) and a header with a futex
// doorbell. Peers find each other through the rendezvous KV: a rank
// publishes its segment's name and a random nonce, every peer tries to open
// the segment and read the nonce back (so two network namespaces or
// containers that merely share a hostname, or that do not share /dev/shm,
// never pass), and a pair uses shared memory only when both sides could
// open each other's segment. Once every rank has attached, the segments are
// unlinked: nothing stays in /dev/shm, even if every rank is SIGKILLed
// afterwards (the memory goes with the last mapping).
//
// The segment also holds a call board: two slots (by call parity), each a
// flag, a small header and an inline payload. A rank publishes a call by
// writing its slot and then the call's number into the flag; every rank
// waits for every peer's flag and reads the peers' slots in place. That is
// one write and no copy out for small messages (hb's rank-order fold reads
// the peers' slots directly), and it carries each call's fingerprint
// (comm/fingerprint.h) in the same round. After the inline payload, each
// slot has a staging area: large reductions go through it piece by piece,
// each rank folding its share of a piece straight from the peers' slots,
// and an alltoallv whose sends fit the whole payload posts them there with
// its print, in one round (comm/gloo_backend.h). No "done reading" flag is
// needed: a rank reuses a slot two calls later, and by then every peer has
// published the call in between, which it does only after it finished
// reading this one.
//
// A ring is a single-producer single-consumer byte stream: the sender
// copies a message in (an 8-byte length, then the payload), the receiver
// copies it out; both publish their position with release stores. Waiting
// spins briefly (never yields), then sleeps on the doorbell futex of the
// waiting rank's own header (any peer that made progress for it rings it).
// Every sleep is bounded, and a wait ends early when the WaitBreaker trips
// (abort, a peer declared lost by the rendezvous), when a peer marks itself
// failed or gone (its transport failed or was destroyed), or at the timeout.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/p2p.h"
#include "comm/spin_policy.h"

namespace hb {
namespace rdv {
class KV;
}
namespace comm {

// A peer whose shared-memory channel failed (it marked itself failed or
// gone); the backend reports it as HB_ERR_PEER_FAILED naming the rank.
class ShmPeerLost : public std::runtime_error {
 public:
  ShmPeerLost(int peer, const std::string &what)
      : std::runtime_error(what), peer_(peer) {}
  int peer() const { return peer_; }

 private:
  int peer_;
};

struct ShmSegment;  // shm_transport.cc

class ShmTransport {
 public:
  static constexpr int kChannels = 3;  // rank-order reduce, gather; control

  // Collective over the world through kv under prefix. mode: "auto" (shared
  // memory where both sides can open each other's segment), "shm" (every
  // pair must, else HB_ERR_CONFIG on every rank) or "tcp" (none; no
  // segment is made).
  // host: the address this rank advertises (or a pretend host in tests,
  // no spaces): ranks that advertise different ones are different hosts
  // and never share memory, even where they could open each other's
  // segment (two network namespaces on one machine share /dev/shm).
  // spin_us: how long a wait spins before it sleeps (option
  // cpu_wait_spin_us); -1 chooses by the CPUs this host's ranks share and
  // by the host's load (comm/spin_policy.h). slice_us > 0: the scheduler
  // slice a waiter asks for while it sleeps (option cpu_wait_slice_us,
  // SleepSlice).
  ShmTransport(int rank, int world, rdv::KV &kv, const std::string &prefix,
               const std::string &mode, int64_t timeout_ms,
               const std::string &host, int64_t spin_us = -1,
               int64_t slice_us = 0);
  ~ShmTransport();

  int rank() const { return rank_; }
  int world_size() const { return world_; }
  bool reaches(int peer) const { return peer_[size_t(peer)] != nullptr; }
  bool reaches_all() const { return reached_ == world_ - 1; }
  bool reaches_any() const { return reached_ > 0; }
  // "shm" / "tcp" per peer, for the log.
  std::string describe() const;

  // From any thread: every wait fails from now on (this rank's Health
  // failed); peers see this rank as failed and stop waiting for it.
  void trip();
  // Wakes this rank's own sleeping wait (it then re-checks its condition).
  void wake_self();
  // True when some pair of the world shares memory: then every rank runs
  // the P2P algorithms (over shared memory, TCP or both).
  bool world_uses_shm() const { return world_shm_; }
  // True when every pair of the world shares memory (the same on every
  // rank): then the call board can carry every call.
  bool world_all_shm() const { return world_all_shm_; }
  // Every rank's host leader: the lowest rank it shares memory with (or
  // itself), the same vector on every rank; empty when sharing is not an
  // equivalence (some rank shares with two ranks that do not share with
  // each other), so hosts are not well defined (comm/hier_alltoallv.h).
  const std::vector<int> &host_leaders() const { return leaders_; }

  // The call board (world_all_shm() only). Calls are numbered 1, 2, ... in
  // the same order on every rank. board_post() publishes this rank's
  // header (at most board_header_bytes()) and payload (at most
  // board_payload_bytes(): kInlineBytes, then the staging area) for
  // `call`; a payload already written at board_payload(call) is not
  // copied. board_wait() then waits, spinning first, for
  // every peer to publish it (throws as a P2P wait: trip, peer failed or
  // gone, timeout). After the wait, the slots of `call` may be read until
  // this rank posts call + 1.
  static constexpr size_t kInlineBytes = size_t(64) << 10;
  size_t board_header_bytes() const;
  size_t board_payload_bytes() const;
  // This rank's payload area for `call`: writable from the return of
  // board_wait(call - 1) (no peer reads call - 2 any more) until it posts
  // `call`.
  char *board_payload(uint64_t call) const;
  // head_hash travels in the flag's cache line, so a reader that only
  // compares hashes never touches the header's lines.
  void board_post(uint64_t call, const void *head, size_t head_bytes,
                  uint64_t head_hash, const void *payload,
                  size_t payload_bytes);
  void board_wait(uint64_t call);
  struct BoardSlot {
    const char *head;
    size_t head_bytes;
    uint64_t head_hash;
    const char *payload;
    size_t payload_bytes;
  };
  BoardSlot board_slot(int rank, uint64_t call) const;

 private:
  friend class ShmP2P;
  struct Ring;
  Ring *ring_from(int peer, int channel) const;  // in my segment
  Ring *ring_to(int peer, int channel) const;    // in the peer's segment
  void ring(int peer);                           // wake the peer
  // Blocks until the doorbell rang (returns to let the caller progress)
  // or a bounded slice passed; throws on a trip, a failed peer in `watch`,
  // or past the deadline. `ready`, if given, is checked once this rank
  // counts as a sleeper (for wakers that ring sleepers only).
  void doze(uint32_t seen, const std::vector<int> &watch,
            std::chrono::steady_clock::time_point deadline,
            const std::function<bool()> &ready = nullptr);
  uint32_t doorbell() const;
  // Throws if a wait must end: trip, a peer in `watch` failed or gone.
  void check_waitable(const std::vector<int> &watch) const;
  char *slot_of(int rank, uint64_t call) const;

  int rank_, world_;
  int64_t timeout_ms_;
  int64_t slice_us_;  // > 0: a sleeping waiter's slice (SleepSlice)
  std::unique_ptr<SpinPolicy> spin_;  // a wait's spin before it sleeps
  size_t ring_bytes_;
  std::unique_ptr<ShmSegment> mine_;
  std::vector<std::unique_ptr<ShmSegment>> peer_;  // null: not same host
  int reached_ = 0;
  bool world_shm_ = false;
  bool world_all_shm_ = false;
  std::atomic<bool> tripped_{false};
  std::vector<int> all_peers_;
  std::vector<int> leaders_;
};

// P2P over the rings of a ShmTransport: serves one call (the channels'
// streams carry on across calls). Operations make progress inside wait()
// and finish(), all of them at once, so a send blocked on a full ring
// never holds up a receive.
class ShmP2P final : public P2P {
 public:
  explicit ShmP2P(ShmTransport &t);
  ~ShmP2P() override;
  int rank() const override { return t_.rank_; }
  int world_size() const override { return t_.world_; }
  int send(int peer, int channel, const void *data, size_t bytes) override;
  int recv(int peer, int channel, void *data, size_t bytes) override;
  void wait(int id) override;
  void finish() override;
  // Makes progress until stop is set (then ring wake_self()) or nothing is
  // left: comm/routed_p2p.h runs it beside a wait on another transport.
  void pump(const std::atomic<bool> &stop);
  bool idle() const { return active_.empty(); }

 private:
  struct Op {
    int peer, channel;
    char *data;
    size_t bytes;
    size_t done = 0;  // payload bytes moved
    bool is_send;
    bool header = false;  // length word moved
    bool complete = false;
  };
  int post(int peer, int channel, char *data, size_t bytes, bool is_send);
  bool advance(Op &op);  // true if it moved
  bool progress();       // advances the head op of every stream
  void wait_until(const std::function<bool()> &done);

  ShmTransport &t_;
  std::vector<Op> ops_;
  // Per (peer, channel, direction): indices of ops in posting order, and
  // how many of them are complete.
  std::vector<std::vector<int>> queue_;
  std::vector<size_t> head_;
  std::vector<int> active_;  // queues with ops left
  std::vector<int> watch_;   // peers with ops pending
  std::chrono::steady_clock::time_point deadline_;
};

}  // namespace comm
}  // namespace hb
